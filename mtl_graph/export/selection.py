"""Which memories measurably helped: the ones an export may write, and why each of the others stays behind.

Studies of agent context files find that blind export hurts (files an LLM wrote lowered success and raised cost),
so a memory goes out only on its record: it is active (never flagged by screening, quarantined, archived or
superseded), it was cited in at least `min_runs` judged runs, and its utility (the lifecycle's posterior success
rate of runs that use it) is above the base rate of the pool's other runs. Everything else is left out with its
reason, so an export can say what it did not write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.memory.base import Memory
from mtl_graph.memory.errors import PoolError
from mtl_graph.memory.lifecycle.policy import BaseRate, LifecycleConfig, utility
from mtl_graph.memory.pool.points import memory_of


class ExportConfig(BaseModel):
    """What an export takes from the pool."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    min_runs: int = Field(default=3, ge=1, le=100_000)
    """Judged runs that cited a memory before its record counts as evidence that it helped."""
    domain: str | None = None
    """Only memories from runs of this domain (benchmark, repository); None: every domain."""
    formats: list[str] | None = None
    """Only memories of these formats (None: every format)."""
    limit: int = Field(default=30, ge=1, le=1000)
    """Most memories written, highest utility first: a context file is read on every run and should stay short."""
    lifecycle: LifecycleConfig = Field(default_factory=LifecycleConfig)
    """The prior that utility is computed with (the pool's online loop uses the same)."""


@dataclass(frozen=True)
class Evidence:
    """Why a memory counts as helpful: its cited runs and its utility against the base rate."""

    cited_runs: int
    cited_successes: int
    utility: float
    base_rate: float

    def sentence(self) -> str:
        share = self.cited_successes / self.cited_runs if self.cited_runs else 0.0
        return (f"cited in {self.cited_runs} judged runs, {self.cited_successes} succeeded ({share:.0%}); "
                f"utility {self.utility:.2f} against the pool's base rate {self.base_rate:.2f}")

    def to_json(self) -> dict[str, Any]:
        return {"cited_runs": self.cited_runs, "cited_successes": self.cited_successes,
                "utility": round(self.utility, 4), "base_rate": round(self.base_rate, 4)}


@dataclass(frozen=True)
class Exported:
    """A memory to write, with its evidence (the renderer applies redaction again to what it writes)."""

    memory: Memory
    evidence: Evidence


@dataclass(frozen=True)
class LeftOut:
    """A memory the export did not write, and why."""

    id: str
    reason: str
    kind: str
    """The reason's class (status, scope, evidence, limit, unreadable), for counts."""


@dataclass
class Selection:
    """What an export writes and what it leaves in the pool."""

    kept: list[Exported] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    base_rate: float = 0.5

    def counts(self) -> dict[str, int]:
        """Left-out memories by the class of their reason."""
        out: dict[str, int] = {}
        for item in self.left_out:
            out[item.kind] = out.get(item.kind, 0) + 1
        return out


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _status_reason(memory: Memory) -> str | None:
    if memory.status == "active":
        return None
    why = {"archived": memory.archived, "quarantined": "; ".join(memory.quarantined),
           "flagged": "; ".join(memory.flagged)}.get(memory.status, "")
    return f"{memory.status}" + (f": {why}" if why else "")


def judge(memory: Memory, rate: BaseRate, cfg: ExportConfig) -> Evidence | LeftOut:
    """The memory's evidence when it measurably helped, else why it is left out."""
    if reason := _status_reason(memory):
        return LeftOut(memory.id, reason, "status")
    if cfg.formats is not None and memory.type not in cfg.formats:
        return LeftOut(memory.id, f"{article(memory.type)} {memory.type} memory (exporting "
                                  f"{', '.join(cfg.formats)})", "scope")
    if cfg.domain is not None and cfg.domain not in memory.domains:
        return LeftOut(memory.id, f"not from a run of {cfg.domain!r} ({', '.join(memory.domains) or 'no domain'})",
                       "scope")
    stats = memory.stats
    cited = stats.cited_success + stats.cited_failure
    if cited < cfg.min_runs:
        return LeftOut(memory.id, f"cited in {cited} judged run{'s' * (cited != 1)} (needs {cfg.min_runs})",
                       "evidence")
    base = rate.without(stats)
    value = utility(stats, base, cfg.lifecycle)
    evidence = Evidence(cited, stats.cited_success, value, base)
    if value <= base:
        return LeftOut(memory.id, f"did not help: {evidence.sentence()}", "evidence")
    return evidence


def select(points: Iterable[Any], rate: BaseRate, cfg: ExportConfig) -> Selection:
    """Judge every stored point (a `RawHit`: an unreadable one is left out, not fatal) and keep the best
    `cfg.limit` of those that helped, by utility then cited runs then id (the same order on every export)."""
    selection = Selection(base_rate=rate.rate)
    helped: list[Exported] = []
    for point in points:
        try:
            memory = memory_of(point)
        except PoolError as exc:
            selection.left_out.append(LeftOut(str(point.id), f"unreadable: {exc}", "unreadable"))
            continue
        verdict = judge(memory, rate, cfg)
        if isinstance(verdict, LeftOut):
            selection.left_out.append(verdict)
        else:
            helped.append(Exported(memory, verdict))
    helped.sort(key=lambda e: (-e.evidence.utility, -e.evidence.cited_runs, e.memory.id))
    for item in helped[cfg.limit:]:
        selection.left_out.append(LeftOut(item.memory.id, f"over the limit of {cfg.limit} ({item.evidence.sentence()})",
                                          "limit"))
    selection.kept = helped[:cfg.limit]
    return selection


def select_from(pool: Any, cfg: ExportConfig) -> Selection:
    """`select` over a pool's stored points and base rate."""
    return select(pool.store.scroll(), pool.base_rate(), cfg)
