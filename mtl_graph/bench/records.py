"""Data of an evaluation: the configuration, conditions, memory scopes, and one result per run."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from mtl_graph.core.trajectory import TokenUsage, Trajectory, Verdict, VerdictStatus
from mtl_graph.memory.base import MemoryType

ZERO_SHOT = "zero_shot"


class Condition(BaseModel):
    """How a task is run: zero-shot, or with one memory format under a pool restriction."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_format: MemoryType | None = None
    """The memory format retrieved into the prompt; None is the zero-shot baseline."""
    pool_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    """Seeded fraction of the pool that may be retrieved (scaling curves)."""
    source_domains: int | None = Field(default=None, ge=1)
    """Only memories from this many other domains, chosen per task with a seed (scaling by domain count)."""
    source_model: str | None = None
    """Only memories from runs of this model (cross-model transfer)."""
    holdout: bool = True
    """Hold-one-out: never retrieve memories whose domain is the task's own."""

    @model_validator(mode="after")
    def _zero_shot_is_plain(self) -> "Condition":
        if self.memory_format is None and (self.pool_fraction != 1.0 or self.source_domains or self.source_model):
            raise ValueError("a zero-shot condition takes no pool restriction")
        return self

    @property
    def key(self) -> str:
        """Stable name, e.g. ``zero_shot``, ``insight``, ``insight@pool=0.25``, ``summary@from=m``."""
        if self.memory_format is None:
            return ZERO_SHOT
        parts = [self.memory_format.value]
        if self.pool_fraction != 1.0:
            parts.append(f"pool={self.pool_fraction:g}")
        if self.source_domains:
            parts.append(f"domains={self.source_domains}")
        if self.source_model:
            parts.append(f"from={self.source_model}")
        if not self.holdout:
            parts.append("no-holdout")
        return "@".join(parts)

    @property
    def is_zero_shot(self) -> bool:
        return self.memory_format is None


class MemoryRef(BaseModel):
    """What the harness knows about one memory of the pool (enough to scope and audit retrieval)."""

    id: str
    """Memory id."""
    type: MemoryType
    """Format."""
    domains: list[str] = Field(default_factory=list)
    """Domains of its source runs."""
    source_task_ids: list[str] = Field(default_factory=list)
    """Tasks whose runs produced it."""
    task_models: list[str] = Field(default_factory=list)
    """Models that ran those tasks."""


class Pool(BaseModel):
    """The memory pool after phase 2 (frozen for phase 3: runs do not write back)."""

    memories: list[MemoryRef] = Field(default_factory=list)
    """Every memory distilled from the zero-shot runs (plus any the pool held before)."""
    note: str = ""
    """How the pool was made (e.g. that no distiller was given)."""


class MemoryScope(BaseModel):
    """Which memories a run may retrieve; the graph runner turns this into Qdrant filters."""

    memory_type: MemoryType
    """Retrieve only this format."""
    exclude_domains: list[str] = Field(default_factory=list)
    """Domains that must not be retrieved (hold-one-out)."""
    exclude_task_ids: list[str] = Field(default_factory=list)
    """Source tasks whose memories must not be retrieved (the task itself)."""
    only_ids: list[str] | None = None
    """When set, only these memory ids (a pool fraction, a domain or model subset); None means the whole pool."""
    top_k: int = 3
    """How many memories to retrieve."""
    write_back: bool = False
    """Whether the run may add memories to the pool (off: phase 3 reads a frozen pool)."""


class RetrievedMemory(BaseModel):
    """One memory a run retrieved, as reported by the runner."""

    id: str
    """Memory id."""
    score: float = 0.0
    """Retrieval score."""
    type: str = ""
    """Format."""
    domains: list[str] = Field(default_factory=list)
    """Domains of its source runs."""
    source_task_ids: list[str] = Field(default_factory=list)
    """Tasks it was distilled from."""


class RunOutcome(BaseModel):
    """What a runner returns for one attempt at one task."""

    verdict: Verdict | None = None
    """Ground-truth decision (the task's tests) or the judge's when there are no tests."""
    judge_verdict: Verdict | None = None
    """The LLM judge's decision when it ran alongside the tests (for judge accuracy)."""
    trajectory: Trajectory | None = None
    """The run; phase 2 distills zero-shot trajectories."""
    retrieved: list[RetrievedMemory] = Field(default_factory=list)
    """Memories put into the prompt."""
    new_memory_ids: list[str] = Field(default_factory=list)
    """Memories this run wrote to the pool."""
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    """Tokens used by the agent."""
    cost_usd: float | None = None
    """Cost reported by the runner; filled from the configured prices when None."""
    stage_cost: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Model calls and tokens per stage that called a model (the graph's run `cost`): execute is the agent's own,
    every other stage (plan, judge, distill) and memory tool calls are the memory method's extra cost."""
    duration_s: float = 0.0
    """Wall time of the run."""
    error: str | None = None
    """Infrastructure error (not a failed task); errored runs are retried on resume."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when the run ended without error and the verdict is a pass."""
        return self.error is None and self.verdict is not None and self.verdict.status == VerdictStatus.PASS


class TaskResult(RunOutcome):
    """One line of results.jsonl: a task × condition × attempt and its outcome."""

    suite: str
    """Suite name."""
    task_id: str
    """Task id."""
    domain: str
    """Task domain (hold-one-out label)."""
    condition: Condition
    """The condition it ran under."""
    attempt: int = Field(ge=0)
    """Attempt number, 0-based (pass@k draws several)."""
    runner: str = ""
    """Which runner produced it."""
    leaked_memory_ids: list[str] = Field(default_factory=list)
    """Retrieved memories that broke the scope (same domain, same task, wrong format, outside the subset)."""

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.suite, self.task_id, self.condition.key, self.attempt)


class EvalConfig(BaseModel):
    """Everything that decides what an evaluation computes; a results directory holds exactly one."""

    model_config = ConfigDict(extra="forbid")

    suites: list[str] = Field(min_length=1)
    """Suite specs."""
    runner: str
    """``oracle``, ``noop``, ``scripted``, ``graph:PROVIDER:MODEL``, ``remote:...``."""
    model: str | None = None
    """PROVIDER:MODEL the agent runs with (None for offline runners)."""
    formats: list[MemoryType] = Field(default_factory=lambda: list(MemoryType))
    """Memory formats of phase 3 (empty: zero-shot only)."""
    k: int = Field(default=1, ge=1)
    """Pass@k."""
    samples: int | None = Field(default=None, ge=1)
    """Attempts per task and condition (n >= k); defaults to k."""
    seed: int = 42
    """Seed of task sampling, pool fractions and domain choices."""
    limit: int | None = Field(default=None, ge=1)
    """Tasks per suite (seeded sample); None for all."""
    pool_fractions: list[float] = Field(default_factory=list)
    """Extra pool fractions below 1 for scaling curves (e.g. 0.25, 0.5, 0.75)."""
    source_domain_counts: list[int] = Field(default_factory=list)
    """Extra numbers of source domains for scaling curves."""
    source_model: str | None = None
    """Use only memories from this model's runs (cross-model)."""
    holdout: bool = True
    """Hold-one-out by domain."""
    top_k: int = Field(default=3, ge=1)
    """Memories retrieved per run."""
    price_input_per_mtok: float = 0.0
    """USD per million input tokens (cost accounting; not part of the identity)."""
    price_output_per_mtok: float = 0.0
    """USD per million output tokens (cost accounting; not part of the identity)."""

    @field_validator("pool_fractions")
    @classmethod
    def _fractions(cls, v: list[float]) -> list[float]:
        if any(not 0 < f < 1 for f in v):
            raise ValueError("pool fractions must lie strictly between 0 and 1 (1 is always run)")
        return sorted(set(v))

    @model_validator(mode="after")
    def _samples(self) -> "EvalConfig":
        if self.samples is not None and self.samples < self.k:
            raise ValueError(f"samples ({self.samples}) must be >= k ({self.k})")
        return self

    @property
    def n_samples(self) -> int:
        return self.samples or self.k

    def identity(self) -> dict[str, Any]:
        """The fields a resumed run must match (prices only change accounting)."""
        return self.model_dump(mode="json", exclude={"price_input_per_mtok", "price_output_per_mtok"})

    def conditions(self) -> list[Condition]:
        """Zero-shot, then each format with the whole pool, then the scaling and cross-model variants."""
        out = [Condition()]
        base = {"holdout": self.holdout, "source_model": self.source_model}
        for fmt in self.formats:
            out.append(Condition(memory_format=fmt, **base))
            out += [Condition(memory_format=fmt, pool_fraction=f, **base) for f in self.pool_fractions]
            out += [Condition(memory_format=fmt, source_domains=n, **base) for n in self.source_domain_counts]
        return out
