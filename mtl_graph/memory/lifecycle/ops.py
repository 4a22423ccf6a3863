"""The pool's side of the online loop: credit runs, retrieve with re-ranking and a floor, quarantine, release.

`PoolLifecycle` is held by each pool handle (`pool.lifecycle`) and given the pool as a `LifecyclePool` (its public
search, read and write API); the pool's `credit`, `retrieve`, `quarantined`... hand over to it. The base rate
and the calibrated floors are the pool's maintained statistics (memory/pool/stats.py), kept current on write.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterable

from mtl_graph.memory.base import Memory, Outcome
from mtl_graph.memory.engine.storage import Conditions, QuerySpec
from mtl_graph.memory.lifecycle.floor import FloorCache
from mtl_graph.memory.lifecycle.policy import (BaseRate, Candidate, LifecycleConfig, clears_itself, quarantine_reason,
                                               rerank)
from mtl_graph.memory.lifecycle.protocol import LifecyclePool
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.pool.points import SearchHit, memory_of, payload_of
from mtl_graph.memory.pool.search import RankedHit
from mtl_graph.memory.usage import (CREDIT_KEY, RECORD_FIELDS, TALLY_KEY, CreditEntry, Use, credit_update, record_of,
                                    verdict_source)

DESCENDANT = "descendant of "
"""How a descendant's quarantine reason starts (followed by the harmful memory's id)."""


@dataclass
class CreditReport:
    """What crediting one run did."""

    credited: dict[str, bool] = field(default_factory=dict)
    """Memory id (as stored: an alias resolves to the memory that absorbed it) -> cited."""
    missing: list[str] = field(default_factory=list)
    """Ids given that are not in the pool (deleted since the run retrieved them)."""
    quarantined: list[str] = field(default_factory=list)
    """Memories this run's evidence quarantined, descendants included."""


@dataclass
class Retrieval:
    """What a lifecycle search found and why: the hits to inject and every candidate's trace."""

    hits: list[SearchHit]
    candidates: list[Candidate]
    floor: float | None
    floor_source: str
    base_rate: float

    def trace(self) -> dict[str, Any]:
        out = {"floor": None if self.floor is None else round(self.floor, 4), "floor_source": self.floor_source,
               "base_rate": round(self.base_rate, 4), "candidates": [c.trace() for c in self.candidates],
               "injected": [h.memory.id for h in self.hits]}
        # the links of what was injected: a newer memory served in place of the ones it superseded, or (research
        # retrieval, which serves superseded memories) a superseded one with the memory that contradicts it
        supersedes = {h.memory.id: h.memory.supersedes for h in self.hits if h.memory.supersedes}
        superseded = {h.memory.id: h.memory.superseded_by for h in self.hits if h.memory.superseded_by}
        if supersedes:
            out["supersedes"] = supersedes
        if superseded:
            out["superseded_by"] = superseded
        return out


RERANK_FIELDS = (*RECORD_FIELDS, "memory.stale")
"""What the re-rank reads of each candidate (its record for utility and decay, `is_stale`): the payload fields a
lifecycle search asks for; whole payloads are read for the k kept alone."""


def is_stale(payload: dict[str, Any]) -> bool:
    """Whether a point's memory is marked stale, read without parsing it."""
    memory = payload.get("memory")
    return isinstance(memory, dict) and bool(memory.get("stale"))


def _listed(value: Any) -> list[str]:
    """A payload list of ids (anything else, from a damaged or hostile pool, is none)."""
    return [str(v) for v in value] if isinstance(value, list) else []


class PoolLifecycle:
    """The online loop's reads and writes on one pool handle: base rate, credit, quarantine, release, retrieval
    with re-ranking and the relevance floor."""

    def __init__(self, pool: LifecyclePool) -> None:
        self.pool = pool
        self.floors = FloorCache(pool.maintained)
        """The calibrated relevance floor of each format (see floor.py), kept with the pool's statistics."""

    def contents_changed(self) -> None:
        """Forget what was computed from the pool's contents (after a restore, or another writer's bulk change):
        the floors and the statistics are read again (rebuilt from the pool when their record is stale)."""
        self.floors.clear()
        self.pool.maintained.reload()

    # ------------------------------------------------------------------ the base rate
    def base_rate(self) -> BaseRate:
        """Successes and failures of the credited runs the pool's memories were shown in: the pool's maintained
        statistics (memory/pool/stats.py), kept current on every write, never a scan of the pool."""
        totals = self.pool.maintained.totals()
        return BaseRate(totals.success, totals.failure)

    # ------------------------------------------------------------------ credit
    def credit(self, run_id: str, uses: Iterable[Use], outcome: Outcome | str, source: str = "given", *,
               lifecycle: LifecycleConfig | None = None, at: datetime | None = None) -> CreditReport:
        """Record one judged run in the record of every memory it was shown (cited or not).

        Each memory gets one entry keyed by the run id, merged into its payload by the engine: safe between
        threads and between processes sharing a server, and a run credited twice counts once. With a lifecycle
        config, memories the evidence now condemns are quarantined (and their descendants)."""
        if run_id == TALLY_KEY:
            raise ValueError(f"run id {run_id!r} is reserved (the key of the credit map's cached tally)")
        outcome, report = Outcome(outcome), CreditReport()
        at = at or datetime.now(timezone.utc)
        wanted: dict[str, bool] = {}
        for use in uses:
            wanted[use.id] = wanted.get(use.id, False) or use.cited
        store = self.pool.store
        with self.pool.write_lock:
            found = {hit.id: hit for hit in self.pool.fetch(list(wanted))}
            aliases = {i: h.id for h in found.values() for i in [h.id, *_listed(h.payload.get("merged_ids"))]}
            for given, cited in wanted.items():
                stored = aliases.get(given)
                if stored is None:
                    report.missing.append(given)
                    continue
                report.credited[stored] = report.credited.get(stored, False) or cited
            with self.pool.maintained.batch():  # the pool's statistics follow the store's writes (memory/pool/stats.py)
                for stored, cited in report.credited.items():
                    entry = CreditEntry(run_id, cited, outcome, verdict_source(source), at)
                    before = found[stored].payload.get(CREDIT_KEY)
                    store.set_payload(stored, credit_update(before, {run_id: entry.payload()}), key=CREDIT_KEY)
            if lifecycle is not None:
                cited_ids = [i for i, c in report.credited.items() if c]
                report.quarantined = self._quarantine_if_harmful(cited_ids, lifecycle)
        return report

    def update_stats(self, ids: Iterable[str], outcome: Outcome | str) -> None:
        """Count one showing of each memory in a run that ended with `outcome` (no citation information)."""
        self.credit(f"stats-{uuid.uuid4().hex}", [Use(i, False) for i in ids], outcome)

    # ------------------------------------------------------------------ quarantine
    def _quarantine_if_harmful(self, ids: list[str], cfg: LifecycleConfig) -> list[str]:
        if not ids:
            return []
        rate = self.base_rate()
        out = []
        for memory in [memory_of(h) for h in self.pool.fetch(ids)]:
            if memory.quarantined or memory.archived:
                continue
            reason = quarantine_reason(memory, rate.without(memory.stats), cfg)
            if reason is not None:
                self._rewrite(memory, quarantined=[reason])
                out += [memory.id, *self._quarantine_descendants(memory.id, rate, cfg)]
        return out

    def _quarantine_descendants(self, parent: str, rate: BaseRate, cfg: LifecycleConfig) -> list[str]:
        """Memories distilled from runs that cited `parent` follow it, unless their own record clears them."""
        out, frontier, seen = [], [parent], {parent}
        while frontier:
            current = frontier.pop()
            for memory in self._derived_from(current):
                if memory.id in seen or memory.archived:
                    continue
                seen.add(memory.id)
                if clears_itself(memory, rate.without(memory.stats), cfg):
                    continue
                reason = f"{DESCENDANT}{current} (distilled from a run that cited it)"
                if reason not in memory.quarantined:
                    self._rewrite(memory, quarantined=sorted({*memory.quarantined, reason}))
                    out.append(memory.id)
                frontier.append(memory.id)
        return out

    def _derived_from(self, memory_id: str) -> list[Memory]:
        probe = [1.0] + [0.0] * (self.pool.dim - 1)  # any vector will do: the filter on derived_from is exact
        hits = self.pool.store.query([QuerySpec(limit=1000, where=Conditions(equals={"derived_from": memory_id}),
                                                dense=probe)])[0]
        return [memory_of(h) for h in hits]

    def _rewrite(self, memory: Memory, **update: Any) -> None:
        self.pool.store.set_payload(memory.id, payload_of(memory.model_copy(update=update)))

    def quarantined(self) -> list[Memory]:
        """The memories the online loop stopped serving, with their evidence."""
        return [m for m in self.pool if m.quarantined]

    def release_quarantine(self, memory: Memory) -> list[str]:
        """A person clears a quarantined memory: it is served again, judged only on evidence from now on; the
        descendants quarantined because of it are released too. Returns the ids released."""
        out = [memory.id]
        self._rewrite(memory, quarantined=[],
                      quarantine_released=sorted({*memory.quarantine_released, *memory.quarantined}),
                      quarantine_baseline=memory.stats)
        frontier, seen = [memory.id], {memory.id}
        while frontier:  # down the chain: a grandchild followed its parent, which followed this one
            parent = frontier.pop()
            for child in self._derived_from(parent):
                mine = [r for r in child.quarantined if r.startswith(f"{DESCENDANT}{parent} ")]
                if not mine or child.id in seen:
                    continue
                seen.add(child.id)
                rest = [r for r in child.quarantined if r not in mine]
                self._rewrite(child, quarantined=rest)
                if not rest:
                    out.append(child.id)
                    frontier.append(child.id)
        return out

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, query: str, k: int, where: SearchFilter, *, lifecycle: LifecycleConfig | None = None,
                 retriever: str = "hybrid", min_score: float | None = None) -> Retrieval:
        """Top-k memories with the lifecycle: `candidates` by the ranker, the floor, re-ranking by utility and
        decay, k kept. Without a lifecycle config it is the pool's `search` (the research's retrieval), traced."""
        if lifecycle is None:
            hits = self.pool.search(query, k=k, where=where, retriever=retriever, min_score=min_score)
            candidates = [Candidate(h.memory.id, h.similarity, h.score, i, rank_after=i, injected=True)
                          for i, h in enumerate(hits)]
            return Retrieval(hits, candidates, min_score, "off (research retrieval)", 0.5)
        where = where.served()
        if not self.pool.maintained.totals().other_status:  # every point has a status: `active` as one equality
            where = replace(where, statuses_complete=True)
        # more candidates than are kept: they are read for the re-rank's fields alone (kept in the process between
        # searches where the pool can, memory/pool/field_cache.py), the kept ones whole after it
        selected = RERANK_FIELDS if lifecycle.candidates > k else None
        found = self.pool.ranked(query, max(k, lifecycle.candidates), where, retriever=retriever,
                                 min_score=min_score, with_payload=selected is None)
        if selected is not None:
            found = self._with_fields(found, selected)
        if lifecycle.relevance_floor is not None:
            floor, source = lifecycle.relevance_floor, "set"
        else:
            floor, source = self.floors.floor(self.pool, where)
        records = [record_of(h.raw.payload) for h in found]  # the candidates' records; only the kept are parsed
        needs_rate = any(r.retrieved for r in records)
        base = self.base_rate().rate if needs_rate else 0.5
        candidates = [Candidate(h.raw.id, h.similarity, h.raw.score, i, stale=is_stale(h.raw.payload))
                      for i, h in enumerate(found)]
        order = rerank(candidates, records, k, floor, base, lifecycle)
        if selected is not None:
            order = self._read_whole(found, order, candidates)
        hits = [SearchHit(memory_of(found[i].raw), found[i].raw.score, found[i].similarity, found[i].retriever)
                for i in order]
        return Retrieval(hits, candidates, floor, source, base)

    def _with_fields(self, found: list[RankedHit], fields: tuple[str, ...]) -> list[RankedHit]:
        """The ranked hits that are still stored, with the selected payload fields (read only)."""
        read = {h.id: h.payload for h in self.pool.read_fields([h.raw.id for h in found], fields)}
        for h in found:
            h.raw.payload = read.get(h.raw.id, {})
        return [h for h in found if h.raw.id in read]  # deleted since the search: gone, as in `ranked`

    def _read_whole(self, found: list[RankedHit], order: list[int], candidates: list[Candidate]) -> list[int]:
        """The kept candidates' whole payloads, read in one call into `found`; one deleted since the search is not
        injected (its trace says so)."""
        whole = {h.id: h.payload for h in self.pool.store.fetch([found[i].raw.id for i in order])}
        for i in order:
            if found[i].raw.id in whole:
                found[i].raw.payload = whole[found[i].raw.id]
            else:
                candidates[i].injected, candidates[i].why_not = False, "deleted while it was retrieved"
        return [i for i in order if found[i].raw.id in whole]

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The memory's credit entries, oldest first: run, when, cited, outcome, who gave the verdict."""
        from mtl_graph.memory.usage import history

        hits = self.pool.fetch([memory_id])
        return history(hits[0].payload) if hits else []

    def near_copies(self, memories: list[Memory], among: list[str], threshold: float) -> dict[int, str]:
        """Which of `memories` (index -> id) are near copies of one of the `among` memories: same format, key
        texts at least `threshold` similar. A run that distils what it was shown has learnt nothing new."""
        if not memories or not among:
            return {}
        import numpy as np

        stored = {h.id: h for h in self.pool.fetch(among)}
        vectors = {h.id: h.dense for h in self.pool.store.fetch(list(stored), with_dense=True) if h.dense}
        types = {i: h.payload.get("type") for i, h in stored.items()}
        if not vectors:
            return {}
        keys = self.pool.embed([m.key_text() for m in memories])
        out = {}
        for index, (memory, vector) in enumerate(zip(memories, keys)):
            q = np.asarray(vector, dtype=np.float32)
            q /= float(np.linalg.norm(q)) or 1.0
            best, best_id = -1.0, None
            for mid in sorted(vectors):
                if types.get(mid) != memory.type:
                    continue
                v = np.asarray(vectors[mid], dtype=np.float32)
                similarity = float(v @ q) / (float(np.linalg.norm(v)) or 1.0)
                if similarity > best:
                    best, best_id = similarity, mid
            if best_id is not None and best >= threshold:
                out[index] = best_id
        return out
