"""The online loop's decisions: a memory's utility, re-ranking, the relevance floor, decay and quarantine.

The research retrieves the top k by similarity and never looks back (`lifecycle="off"` does exactly that). With
the lifecycle on, retrieval takes the top `candidates` by similarity, drops those under the relevance floor,
re-ranks by similarity adjusted by utility and decay, and keeps k; memories whose cited runs fail clearly more
often than the pool's runs do are quarantined (never retrieved) until a person releases them.

Utility is the posterior mean of a Beta prior centred on the pool's base rate (`prior_strength` pseudo-runs),
updated with the memory's cited runs (weight 1) and the runs it was shown in but not cited (weight
`exposure_weight`): a memory that is merely present in a run learns little from its outcome. Below
`min_evidence` weighted runs it moves nothing, so a new memory ranks by similarity alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.memory.base import Memory, UsageStats


class LifecycleConfig(BaseModel):
    """How the online loop ranks, floors, decays and quarantines memories."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    candidates: int = Field(default=20, ge=1, le=200)
    """Retrieval takes this many by similarity, re-ranks them, and keeps k."""
    utility_weight: float = Field(default=0.3, ge=0.0, le=5.0)
    """How far a memory's utility (minus the base rate) moves its similarity in the re-ranking."""
    prior_strength: float = Field(default=2.0, gt=0.0, le=100.0)
    """Pseudo-runs of the Beta prior centred on the pool's base rate."""
    exposure_weight: float = Field(default=0.2, ge=0.0, le=1.0)
    """Weight of a run the memory was shown in but not cited (a cited run weighs 1)."""
    min_evidence: float = Field(default=3.0, ge=0.0, le=1000.0)
    """Weighted runs a memory needs before its utility moves the ranking."""
    decay_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    """Most similarity a memory shown again and again without being cited loses."""
    decay_scale: int = Field(default=10, ge=1, le=10_000)
    """Uncited showings (since its last citation) at which a memory has lost half of decay_weight."""
    quarantine_min_cited: int = Field(default=5, ge=1, le=10_000)
    """Cited runs (since any release) before a memory can be quarantined."""
    quarantine_confidence: float = Field(default=0.9, ge=0.5, le=0.999)
    """Quarantine when the upper bound of the cited success rate at this confidence is below the base rate."""
    stale_penalty: float = Field(default=0.1, ge=0.0, le=1.0)
    """Similarity a stale memory (the files its run worked on changed since, `mtl pool verify`) loses."""
    relevance_floor: float | None = Field(default=None, ge=-1.0, le=1.0)
    """Cosine similarity under which a memory is not injected (None: calibrated from the pool, see floor_of)."""
    near_copy: float = Field(default=0.92, ge=0.5, le=1.0)
    """A distilled memory this similar (cosine of key texts) to one its run retrieved is a copy, not new."""
    supersede_with_model: bool = False
    """The run's model decides whether a new memory's advice conflicts with a near duplicate it would supersede
    (False: the deterministic rule of memory/lifecycle/supersede.py)."""


@dataclass
class BaseRate:
    """Successes and failures over the credited runs memories were shown in (the prior's centre)."""

    success: int = 0
    failure: int = 0

    @property
    def rate(self) -> float:
        return (self.success + 1) / (self.success + self.failure + 2)  # Laplace: 0.5 for a pool never credited

    def without(self, stats: UsageStats) -> float:
        """The rate of the runs other memories were shown in: a memory is not compared with itself."""
        success = max(0, self.success - stats.retrieved_success)
        failure = max(0, self.failure - stats.retrieved_failure)
        return (success + 1) / (success + failure + 2)

    def add(self, stats: UsageStats) -> None:
        self.success += stats.retrieved_success
        self.failure += stats.retrieved_failure


def evidence(stats: UsageStats, cfg: LifecycleConfig) -> float:
    """Weighted runs behind a memory's utility."""
    shown = stats.retrieved_success + stats.retrieved_failure - stats.cited_success - stats.cited_failure
    return stats.cited_success + stats.cited_failure + cfg.exposure_weight * max(0, shown)


def utility(stats: UsageStats, base: float, cfg: LifecycleConfig) -> float:
    """Posterior mean success rate of runs that use the memory (the base rate when there is no evidence)."""
    uncited_s = max(0, stats.retrieved_success - stats.cited_success)
    uncited_f = max(0, stats.retrieved_failure - stats.cited_failure)
    alpha = base * cfg.prior_strength + stats.cited_success + cfg.exposure_weight * uncited_s
    beta = (1 - base) * cfg.prior_strength + stats.cited_failure + cfg.exposure_weight * uncited_f
    return alpha / (alpha + beta)


def decay(stats: UsageStats, cfg: LifecycleConfig) -> float:
    """Similarity lost for being shown, uncited, since the last citation (0 when it was just cited)."""
    x = stats.shown_since_cited
    return cfg.decay_weight * x / (x + cfg.decay_scale)


def wilson_upper(successes: int, n: int, confidence: float) -> float:
    """One-sided upper bound of a success rate (Wilson score interval)."""
    if n <= 0:
        return 1.0
    z = NormalDist().inv_cdf(confidence)
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def since_release(memory: Memory) -> tuple[int, int]:
    """Cited successes and failures since a person last released the memory from quarantine."""
    s, base = memory.stats, memory.quarantine_baseline
    if base is None:
        return s.cited_success, s.cited_failure
    return max(0, s.cited_success - base.cited_success), max(0, s.cited_failure - base.cited_failure)


def quarantine_reason(memory: Memory, base: float, cfg: LifecycleConfig) -> str | None:
    """Why the memory must be quarantined now, with its evidence; None when it need not be."""
    success, failure = since_release(memory)
    n = success + failure
    if n < cfg.quarantine_min_cited:
        return None
    upper = wilson_upper(success, n, cfg.quarantine_confidence)
    if upper >= base:
        return None
    return (f"harmful: cited in {n} judged runs, {success} succeeded ({success / n:.0%}); the pool's runs "
            f"succeed {base:.0%}; upper bound at {cfg.quarantine_confidence:.0%} confidence {upper:.0%}")


def clears_itself(memory: Memory, base: float, cfg: LifecycleConfig) -> bool:
    """A descendant's own record clears it: enough cited runs, succeeding at least as often as the pool's."""
    success, failure = since_release(memory)
    n = success + failure
    return n >= cfg.quarantine_min_cited and success / n >= base


# ------------------------------------------------------------------ re-ranking
@dataclass
class Candidate:
    """One memory retrieval considered, with why it was or was not injected."""

    id: str
    similarity: float
    score: float
    """The ranker's score (fused, or the cosine)."""
    rank_before: int
    utility: float | None = None
    evidence: float = 0.0
    decay: float = 0.0
    adjusted: float = 0.0
    stale: bool = False
    """Its code changed since its run: ranked lower by stale_penalty."""
    rank_after: int | None = None
    injected: bool = False
    why_not: str = ""

    def trace(self) -> dict[str, Any]:
        return {"id": self.id, "similarity": round(self.similarity, 4), "score": round(self.score, 5),
                "utility": None if self.utility is None else round(self.utility, 4),
                "evidence": round(self.evidence, 2), "decay": round(self.decay, 4),
                "rank_before": self.rank_before, "rank_after": self.rank_after, "injected": self.injected,
                **({"stale": True} if self.stale else {}),
                **({"why_not": self.why_not} if self.why_not else {})}


def rerank(candidates: list[Candidate], records: list[UsageStats], k: int, floor: float | None, base: float,
           cfg: LifecycleConfig) -> list[int]:
    """Indices of the k candidates to inject, best first; fills every candidate's trace fields.

    The ranker's order is the base: its scores are scaled onto the best candidate's cosine, so a pool with no
    evidence and no decay keeps exactly the ranker's order. Ties break on the memory id (deterministic)."""
    top_score = max((c.score for c in candidates), default=0.0) or 1.0
    top_similarity = max((c.similarity for c in candidates), default=0.0)
    scale = top_similarity if top_similarity > 0 else 1.0
    live = []
    for i, (c, stats) in enumerate(zip(candidates, records)):
        c.evidence = evidence(stats, cfg)
        c.utility = utility(stats, base, cfg)
        c.decay = decay(stats, cfg)
        moved = cfg.utility_weight * (c.utility - base) if c.evidence >= cfg.min_evidence else 0.0
        c.adjusted = scale * c.score / top_score + moved - c.decay - (cfg.stale_penalty if c.stale else 0.0)
        if floor is not None and c.similarity < floor:
            c.why_not = f"below the relevance floor ({c.similarity:.3f} < {floor:.3f})"
            continue
        live.append(i)
    live.sort(key=lambda i: (-candidates[i].adjusted, candidates[i].rank_before, candidates[i].id))
    for rank, i in enumerate(live):
        candidates[i].rank_after = rank
        if rank >= k:
            candidates[i].why_not = f"ranked {rank + 1} after re-ranking (k = {k})"
    for i in live[:k]:
        candidates[i].injected = True
    return live[:k]
