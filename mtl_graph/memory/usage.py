"""A memory's record of use: one credit entry per run it was shown in, merged into the point's payload.

Each credited run writes one entry under the point's `credit` payload key, keyed by the run id, with Qdrant's
merge (`set_payload` with a key): the engine adds the key to the map in one operation. So no update is ever lost,
not between threads of one process nor between processes writing through one Qdrant server (each writes a key of
its own, nobody reads-modifies-writes a counter), and a run credited twice (a retried write back) counts once.
The memory's counts (`UsageStats`) are what its memory JSON stores (an import's or a consolidation's sums) plus
the entries, added up when the memory is read.

The entries' tally is cached in the same map, under `TALLY_KEY`, and written in the same merge as the entry that
changed it, so a reader (the lifecycle's re-rank) reads one small record instead of parsing the whole history. The
cache says how many entries it covers; when two processes credit one memory at once, each writes its own entry and
a tally of what it saw, the map ends with one entry more than either tally covers, and readers see the cache is
stale and count the entries themselves (the next credit of that memory writes a fresh tally).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any, Iterable, Literal

from mtl_graph.memory.base import Memory, Outcome, UsageStats

CREDIT_KEY = "credit"
"""The payload key holding a point's credit entries (run id -> entry)."""
TALLY_KEY = "~tally"
"""The key, inside the credit map, of the cached tally of its entries (not a run id: `credit` refuses it)."""

_OUTCOME = {"success": "s", "failure": "f", "unknown": "u"}
_OUTCOME_BACK = {v: k for k, v in _OUTCOME.items()}


@dataclass(frozen=True)
class Use:
    """One memory as a run saw it."""

    id: str
    cited: bool


@dataclass(frozen=True)
class CreditEntry:
    """One run's entry in a memory's record."""

    run_id: str
    cited: bool
    outcome: Outcome
    source: str
    """Who decided the run's verdict: tests, judge, feedback or given."""
    at: datetime

    def payload(self) -> dict[str, Any]:
        return {"c": int(self.cited), "o": _OUTCOME[self.outcome.value], "v": self.source,
                "t": self.at.isoformat()}


def entry_of(run_id: str, raw: Any) -> CreditEntry | None:
    """An entry read back from a payload; None for one that is not (a hostile or damaged pool is not trusted)."""
    if not isinstance(raw, dict):
        return None
    try:
        at = datetime.fromisoformat(str(raw["t"]))
        outcome = Outcome(_OUTCOME_BACK[raw["o"]])
        cited = raw["c"]
        if cited not in (0, 1) or not isinstance(raw.get("v", ""), str):
            return None
    except (KeyError, ValueError, TypeError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return CreditEntry(run_id, bool(cited), outcome, str(raw.get("v", ""))[:20], at)


def entries(payload: dict[str, Any]) -> list[CreditEntry]:
    """A point's valid credit entries, oldest first (ties by run id: the same order in every process)."""
    raw = payload.get(CREDIT_KEY)
    if not isinstance(raw, dict):
        return []
    found = [e for e in (entry_of(str(k), v) for k, v in raw.items() if k != TALLY_KEY) if e is not None]
    return sorted(found, key=lambda e: (e.at, e.run_id))


def tally_payload(stats: UsageStats, covers: int) -> dict[str, Any]:
    """The cached tally of a credit map holding `covers` entries, as written under TALLY_KEY."""
    return {**stats.model_dump(mode="json"), "n": covers}


def credit_update(before: Any, added: dict[str, Any]) -> dict[str, Any]:
    """What to merge under CREDIT_KEY to add entries (run id -> entry payload) to a credit map that held `before`:
    the entries and the map's new tally, so one engine write changes both."""
    merged = {**(before if isinstance(before, dict) else {}), **added}
    merged.pop(TALLY_KEY, None)
    entries_now = {k: v for k, v in added.items() if k != TALLY_KEY}
    return {**entries_now, TALLY_KEY: tally_payload(tally(entries({CREDIT_KEY: merged})), len(merged))}


def entry_count(raw: dict[str, Any]) -> int:
    """How many keys of a credit map are entries (valid or not: the cache covers the map as it is)."""
    return len(raw) - (TALLY_KEY in raw)


def cached_tally(payload: dict[str, Any]) -> UsageStats | None:
    """The credit map's cached tally when it covers every entry the map holds now; None when stale or absent."""
    raw = payload.get(CREDIT_KEY)
    cache = raw.get(TALLY_KEY) if isinstance(raw, dict) else None
    if not isinstance(cache, dict) or cache.get("n") != entry_count(raw):
        return None
    return _counts({k: v for k, v in cache.items() if k != "n"})


_ZERO = UsageStats()


def _counts(raw: dict[str, Any]) -> UsageStats | None:
    """Counts stored in a payload, validated; None for anything invalid (a damaged or hostile payload is not
    trusted). Most payloads hold one of few records (all zeros, above all): each is validated once per process."""
    try:
        return _validated(tuple(sorted(raw.items())))
    except TypeError:  # an unhashable value: not a record
        return None


@lru_cache(maxsize=4096)
def _validated(items: tuple[tuple[str, Any], ...]) -> UsageStats | None:
    """One validated record per distinct stored dict; shared, so never changed by a reader (`plus` makes new ones)."""
    try:
        return UsageStats.model_validate(dict(items))
    except ValueError:
        return None


def entries_tally(payload: dict[str, Any]) -> UsageStats | None:
    """The counts of a point's credit entries: the cached tally when current, else counted; None without any."""
    raw = payload.get(CREDIT_KEY)
    if not isinstance(raw, dict) or not entry_count(raw):
        return None
    cached = cached_tally(payload)
    if cached is not None:
        return cached
    found = entries(payload)
    return tally(found) if found else None


def tally(found: Iterable[CreditEntry]) -> UsageStats:
    """The counts of a list of entries (oldest first)."""
    n = {"retrieved": 0, "retrieved_success": 0, "retrieved_failure": 0, "cited": 0, "cited_success": 0,
         "cited_failure": 0, "by_judge": 0}
    since, last = 0, None
    for e in found:
        success, failure = e.outcome == Outcome.SUCCESS, e.outcome == Outcome.FAILURE
        n["retrieved"] += 1
        n["retrieved_success"] += success
        n["retrieved_failure"] += failure
        n["by_judge"] += e.source == "judge"
        if e.cited:
            n["cited"] += 1
            n["cited_success"] += success
            n["cited_failure"] += failure
            since = 0
        else:
            since += 1
        last = e.at
    return UsageStats(**n, shown_since_cited=since, last_shown=last)


RECORD_FIELDS = ("memory.stats", CREDIT_KEY)
"""The payload fields `record_of` reads: a read for records alone selects these (not the memory's text)."""


def record_of(payload: dict[str, Any]) -> UsageStats:
    """A point's full record read straight from its payload, without parsing the memory (ranking, base rate):
    the stored counts (ignored when malformed: a damaged or hostile payload is not trusted) plus its entries."""
    raw = payload.get("memory")
    stored = raw.get("stats") if isinstance(raw, dict) else None
    base = (_counts(stored) if isinstance(stored, dict) else None) or _ZERO
    counted = entries_tally(payload)
    return base.plus(counted) if counted is not None else base


def with_record(memory: Memory, payload: dict[str, Any]) -> Memory:
    """The memory with its full record as `stats` (stored counts + credit entries); the stored counts stay
    available as `stored_stats(memory)` so writing the memory back never counts its entries twice."""
    counted = entries_tally(payload)
    if counted is None:
        return memory
    base = memory.stats
    memory = memory.model_copy(update={"stats": base.plus(counted)})
    memory._stored_stats = base
    return memory


def stored_stats(memory: Memory) -> UsageStats:
    """The counts the memory's own JSON holds (its record without the pool's credit entries)."""
    return memory._stored_stats if memory._stored_stats is not None else memory.stats


def history(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The credit entries as rows for people (`mtl memories show`, the Studio pool view)."""
    return [{"run_id": e.run_id, "at": e.at.isoformat(timespec="seconds"), "cited": e.cited,
             "outcome": e.outcome.value, "verdict_by": e.source} for e in entries(payload)]


VERDICT_SOURCES = ("tests", "judge", "feedback")
"""Who may be named as a verdict's source; anything else is "given" (a label in a log, a caller's word).
"feedback": a client said the memory helped or hurt (the MCP server's `feedback` tool)."""


def verdict_source(source: str) -> Literal["tests", "judge", "feedback", "given"]:
    return source if source in VERDICT_SOURCES else "given"  # type: ignore[return-value]
