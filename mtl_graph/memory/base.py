"""What every memory is (identity, provenance, usage record, screening state) and `Memory`, any registered format.

The formats themselves (trajectory, workflow, summary, insight, and any other) are declared in their own modules
under mtl_graph/memory/formats/, which import this one: their models are imported from there
(`from mtl_graph.memory.formats.insight import InsightMemory`). This module reads only the registry
(`mtl_graph.memory.formats`, which imports no format module until it is first read)."""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Iterator, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, TypeAdapter, ValidationError
from pydantic_core import core_schema

from mtl_graph.core.trajectory import CodeLink, Outcome
from mtl_graph.memory import formats as registry

__all__ = ["COUNTS", "MAX_LONG", "MAX_SHORT", "MAX_STEPS", "MAX_TEXT", "MEMORY_ADAPTER", "MEMORY_CLASSES",
           "NOT_CONTENT", "LongText", "Memory", "MemoryBase", "MemoryType", "Outcome", "Provenance", "ShortText",
           "Text", "UsageStats", "first_validation_error", "memory_type_of", "parse_memory", "render_memories",
           "strings_of"]

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
    """A format's name: the four built-in ones as members, from concrete to abstract; the name of any other
    registered format is accepted too (as a member made on the spot), so pydantic fields and `.value` work for
    every format."""

    TRAJECTORY = "trajectory"
    WORKFLOW = "workflow"
    SUMMARY = "summary"
    INSIGHT = "insight"

    @classmethod
    def _missing_(cls, value: object) -> "MemoryType | None":
        if not isinstance(value, str) or registry.find(value) is None:
            return None
        member = str.__new__(cls, value)
        member._name_, member._value_ = value.upper(), value  # not cached: a format unregistered is gone
        return member


NOT_CONTENT = {"id", "sources", "stats", "flagged", "released", "merged_ids", "quarantined", "quarantine_released",
               "quarantine_baseline", "archived", "consolidated_from", "stale", "last_verified", "superseded_by",
               "superseded_why", "supersedes"}
"""Fields about a memory (identity, provenance, usage, screening) rather than its content."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Provenance(BaseModel):
    """Where a memory came from; a deduplicated memory keeps one entry per source run."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

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
    code: CodeLink | None = None
    """The repository, commit and files the source run worked on (None: a memory with no code link, never stale)."""


class UsageStats(BaseModel):
    """A memory's record: how often it was shown to an agent, how often the agent cited it, how those runs ended.

    Read from a pool, it is the memory's stored counts (an import's, a consolidation's sums) plus one entry per
    credited run (see memory/usage.py)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

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


class MemoryBase(BaseModel):
    """What every memory format has; a format's model adds its content fields and `type: Literal[name]`."""


    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)

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
    superseded_by: str = ""
    """The newer memory whose advice contradicts this one (memory/lifecycle/supersede.py); kept, not served with
    the lifecycle on, restored by `mtl memories release`; empty when not superseded."""
    superseded_why: str = ""
    """Why it was superseded: which check decided (rule or model) and the conflict it found."""
    supersedes: list[str] = Field(default_factory=list, max_length=1000)
    """The older memories this one superseded (the other side of their `superseded_by`)."""
    stale: list[str] = Field(default_factory=list, max_length=50)
    """Why the code it describes has changed since its run (files changed since the commit, `mtl pool verify`);
    empty when current. A stale memory is still served, ranked lower (LifecycleConfig.stale_penalty)."""
    last_verified: datetime | None = None
    """When `mtl pool verify` last checked its code link against the repository."""
    GIVEN_FIELDS: ClassVar[frozenset[str]] = frozenset()
    """Content fields holding the task's own text (the trajectory's task, ReasoningBank's query)."""
    _stored_stats: UsageStats | None = PrivateAttr(default=None)
    """Read from a pool: the counts its JSON holds, before the pool's credit entries were added (record.py)."""

    @property
    def status(self) -> str:
        """active, stale (its code changed; still served, ranked lower), flagged (screening), quarantined (the
        online loop), superseded (a newer memory contradicts it) or archived (consolidated / pruned)."""
        return "archived" if self.archived else "quarantined" if self.quarantined else \
            "superseded" if self.superseded_by else "flagged" if self.flagged else "stale" if self.stale else "active"

    def model_post_init(self, __context: Any) -> None:
        if not self.id:
            object.__setattr__(self, "id", self.content_id())

    # --- content --------------------------------------------------------------------------
    def content_fields(self) -> dict[str, Any]:
        """The fields that define the memory's identity (not provenance or stats)."""
        return self.model_dump(mode="json", exclude=NOT_CONTENT)

    def given_fields(self) -> frozenset[str]:
        """The content fields that quote the task the agent was given (redaction reads an example password there
        as an example); a format that keeps the task's text names them in GIVEN_FIELDS."""
        return self.GIVEN_FIELDS

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

    def key_text(self) -> str:
        """The retrieval key (the text embedded and searched), as its format declares it."""
        return self._format().key(self)

    def label(self) -> str:
        """What the memory is, for its heading (e.g. "workflow (outcome: success)")."""
        return self._format().label(self)

    def body(self, observation_chars: int = 300) -> str:
        """The memory's own text as shown to an agent (observations cut to observation_chars)."""
        return self._format().body(self, observation_chars)

    def _format(self) -> Any:
        return registry.get(getattr(self, "type"))

    def render(self, index: int, observation_chars: int = 300) -> str:
        """Plain numbered rendering (for people; prompts use mtl_graph.memory.fence, which quotes the body)."""
        return f"## Memory {index}: {self.label()}\n{self.body(observation_chars)}"

    def outcome_tag(self) -> str:
        """" (outcome: success)", for labels."""
        return f" (outcome: {self.outcome.value})"


_MemoryBase = MemoryBase


def _validate_memory(value: Any) -> MemoryBase:
    if isinstance(value, MemoryBase):
        return value
    return parse_memory(value)


def _dump_memory(memory: MemoryBase, info: Any) -> Any:
    return memory.model_dump(mode="json" if info.mode_is_json() else "python", by_alias=info.by_alias,
                             exclude_none=info.exclude_none, exclude_defaults=info.exclude_defaults,
                             exclude_unset=info.exclude_unset)


class _AnyFormat:
    """The pydantic schema of `Memory`: a memory of any format registered when the value arrives."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validate_memory, serialization=core_schema.plain_serializer_function_ser_schema(_dump_memory,
                                                                                            info_arg=True))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        enum = {"type": "string", "enum": registry.names()}
        return {"type": "object", "properties": {"type": enum}, "required": ["type"]}


Memory = Annotated[MemoryBase, _AnyFormat()]
"""A memory of any registered format (a pydantic field of this type validates by the memory's `type`)."""
MEMORY_ADAPTER: TypeAdapter[Memory] = TypeAdapter(Memory)


class _Classes(Mapping[str, "type[MemoryBase]"]):
    """Format name -> memory model, as registered now."""

    def __getitem__(self, name: str) -> type[MemoryBase]:
        fmt = registry.find(name)
        if fmt is None:
            raise KeyError(name)
        return fmt.memory

    def __iter__(self) -> Iterator[str]:
        return iter(registry.names())

    def __len__(self) -> int:
        return len(registry.names())


MEMORY_CLASSES: Mapping[str, type[MemoryBase]] = _Classes()


@functools.cache
def _union(version: int) -> TypeAdapter[Any]:
    classes = tuple(f.memory for f in registry.all_formats())
    member = classes[0] if len(classes) == 1 else Annotated[Union[classes], Field(discriminator="type")]
    return TypeAdapter(member)


def parse_memory(data: dict[str, Any] | str) -> Memory:
    """Validate one memory from a dict or a JSON string (raises pydantic.ValidationError)."""
    adapter = _union(registry.version())
    if isinstance(data, (str, bytes)):
        return adapter.validate_json(data)
    return adapter.validate_python(data)


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
    """Parse a registered format's name (any case) with a clear error naming the registered ones."""
    return MemoryType(registry.get(value).name)
