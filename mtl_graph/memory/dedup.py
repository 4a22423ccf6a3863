"""Deduplication that never loses a run: which memories merge, into which one, and what the pool reports.

Two memories merge only when they have the same type, the same outcome and the same *content* after
normalisation — every field, not only the retrieval key (a trajectory's key is its task text, shared by every run
of that task; its steps are what tells runs apart). Normalisation erases what differs between repeats of the
same run and nothing else: letter case, runs of whitespace, UUIDs, long hex ids and addresses, timestamps,
durations ("0.02s", "3 seconds") and temporary paths. The threshold is therefore "identical after
normalisation", on purpose: any similarity threshold below that is not transitive (A~B and B~C without A~C), so
which memories survive would depend on the order runs arrive in; and two distilled texts that differ by a
sentence came from runs that differed, which is exactly what a pool must not throw away.

Merging is a function of the set of memories, not of their order: the memory kept is the one with the smallest
content id among everything with its dedup key, it carries the union of their provenance (one entry per run id,
sorted), and a later, smaller-id member replaces the stored one. Re-adding a memory is a no-op ("identical").
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

try:
    import hyperscan
except ImportError:  # pragma: no cover - platforms without a wheel run every mask
    hyperscan = None

from mtl_graph.core.patterns import first_class
from mtl_graph.memory.base import COUNTS, Memory, Provenance, UsageStats, parse_memory
from mtl_graph.memory.usage import stored_stats
from mtl_graph.memory.screening.screen import screen

Status = Literal["added", "merged", "identical"]

_DIGIT = "digit"
_NOISE = [  # (pattern, stand-in, what every match holds): what varies between repeats of one run; applied to
    # case-folded text. A pattern runs only on a text holding what its matches hold (a digit, "-" or "/"): most
    # strings of a memory hold none, and a stand-in adds none, so the masks skipped are those that match nothing.
    # Each runs behind a look-ahead for its first characters (the same matches, found sooner; core/patterns.py).
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>", "-"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?"), "<time>",
     _DIGIT),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>", _DIGIT),
    (re.compile(r"\b0x[0-9a-f]+\b"), "<hex>", _DIGIT),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"), "<hex>", _DIGIT),
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?)\b"), "<duration>", _DIGIT),
    (re.compile(r"(?:/private)?/(?:tmp|var/folders|var/tmp)/\S*"), "<tmp>", "/"),
]
_NOISE = [(first_class(pattern), stand_in, holds) for pattern, stand_in, holds in _NOISE]
_ANY_DIGIT = re.compile(r"\d")  # the patterns' own \d: any Unicode decimal digit
_SPACE = re.compile(r"\s+")

# What each mask above (same order) cannot match without: every match of a mask holds a match of its entry here,
# so a text where an entry finds nothing is a text the mask leaves as it is. One Hyperscan pass over a long text
# tells which masks can find anything; most long texts hold no uuid, time, address or temporary path, so most of
# the seven passes are skipped (tests/memory/test_dedup_masks.py compares with every mask run).
# - ASCII text: there `\b`, `\d` and `\s` mean what they mean to Hyperscan (`\d`, `\s` spelled as the ASCII
#   characters they are), so each entry is its mask, with an optional tail cut or (long hex ids) the look-aheads
#   dropped.
# - any other text, as UTF-8 bytes: a character beyond ASCII is a run of 2-4 bytes from 0x80 up, so `\d` and `\s`
#   (which hold other digits and spaces there) become "an ASCII one or such a run"; word boundaries are dropped.
_NEEDS_ASCII = [rb"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
                rb"[0-9]{4}-[0-9]{2}-[0-9]{2}[t ][0-9]{2}:[0-9]{2}",
                rb"\b[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?\b",
                rb"\b0x[0-9a-f]+\b",
                rb"\b[0-9a-f]{7,}\b",
                rb"\b[0-9]+(?:\.[0-9]+)?[\x09-\x0d\x1c-\x1f ]*(?:ms|us|ns|s|secs?|seconds?|mins?|minutes?)\b",
                rb"/(?:tmp|var/folders|var/tmp)/"]
_D = rb"(?:[0-9]|[\x80-\xff]{2,4})"
_S = rb"(?:[\x09-\x0d\x1c-\x1f ]|[\x80-\xff]{2,4})"
_NEEDS_UTF8 = [rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
               _D + rb"{4}-" + _D + rb"{2}-" + _D + rb"{2}[t ]" + _D + rb"{2}:" + _D + rb"{2}",
               _D + rb":" + _D + rb"{2}:" + _D + rb"{2}",
               rb"0x[0-9a-f]",
               rb"[0-9a-f]{7}",
               _D + _S + rb"*(?:[msun]|\xc2\xb5)",  # a number, then a unit: ms, µs, us, ns, s..., min...
               rb"/(?:tmp|var/folders|var/tmp)/"]
assert len(_NEEDS_ASCII) == len(_NEEDS_UTF8) == len(_NOISE)
_PRESCAN_MIN = 256  # shorter texts cost less to mask than to scan first


def _database(expressions: list[bytes]) -> Any:
    db = hyperscan.Database()
    db.compile(expressions=expressions, ids=list(range(len(expressions))), elements=len(expressions),
               flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(expressions))  # one report per mask is all we ask
    return db


class _MaskScan:
    """Which masks can match a text, in one Hyperscan pass."""

    def __init__(self) -> None:
        self.ascii, self.utf8 = _database(_NEEDS_ASCII), _database(_NEEDS_UTF8)
        self._local = threading.local()  # a scan needs scratch space no other thread is using

    def possible(self, text: str) -> set[int]:
        plain = text.isascii()
        db = self.ascii if plain else self.utf8
        scratch = getattr(self._local, "ascii" if plain else "utf8", None)
        if scratch is None:
            scratch = hyperscan.Scratch(db)
            setattr(self._local, "ascii" if plain else "utf8", scratch)
        found: set[int] = set()

        def on_match(mask: int, start: int, end: int, flags: int, context: object) -> None:
            found.add(mask)

        db.scan(text.encode("ascii") if plain else text.encode("utf-8", "surrogatepass"),
                match_event_handler=on_match, scratch=scratch)
        return found


@functools.lru_cache(maxsize=1)
def _mask_scan() -> _MaskScan | None:
    return _MaskScan() if hyperscan is not None else None


def normalize(text: str, *, fast: bool = True) -> str:
    """Text with run-to-run noise masked, case folded and whitespace collapsed. fast=False runs every mask (the
    reference the pre-scan is tested against; the same text)."""
    text = text.casefold()  # first: the masks need no IGNORECASE, which would make them several times slower
    scan = _mask_scan() if fast and len(text) >= _PRESCAN_MIN else None
    if scan is None:
        digits = not fast or _ANY_DIGIT.search(text) is not None  # a stand-in never adds one: known once
        for pattern, stand_in, holds in _NOISE:
            if not fast or (digits if holds is _DIGIT else holds in text):
                text = pattern.sub(stand_in, text)
    else:
        # a mask that cannot match leaves the text as it is; one that changed it (its stand-in may make a new word
        # boundary) has the rest asked again about the new text.
        possible = scan.possible(text)
        for mask, (pattern, stand_in, _) in enumerate(_NOISE):
            if mask in possible:
                text, changed = pattern.subn(stand_in, text)
                if changed:
                    possible = scan.possible(text)
    if not fast:
        return _SPACE.sub(" ", text).strip()
    return " ".join(text.split())  # the same: `\s` and str.split read one set of whitespace characters


def _normalized(value: Any) -> Any:
    if isinstance(value, str):
        return normalize(value)
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def dedup_key(memory: Memory) -> str:
    """Equal for memories that merge: same type, same outcome, same normalised content."""
    return key_of_fields(memory.content_fields())


def key_of_fields(content: dict[str, Any]) -> str:
    """`dedup_key` of a memory whose content fields (`Memory.content_fields()`) are at hand."""
    return _key_of(json.dumps(content, sort_keys=True, ensure_ascii=False))


@functools.lru_cache(maxsize=4096)  # add_many asks for the key of one memory several times
def _key_of(content: str) -> str:
    blob = json.dumps(_normalized(json.loads(content)), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def record_run_id(memory: Memory, source: Provenance) -> str:
    """A stable run id for a provenance entry that came without one (a memory added or imported by hand)."""
    fields = source.model_dump(mode="json", exclude={"run_id", "created_at"})
    blob = json.dumps([memory.content_id(), fields], sort_keys=True)
    return "record-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


def prepared(memory: Memory, keep_stats: bool, flagged: list[str] | None = None) -> Memory:
    """A copy ready to store: every source has a run id, screening decided afresh (or given: `screen_many`'s
    reasons for a batch), stats kept or reset.

    Screening is never taken from the input: a file cannot mark its own memories as clean or released. Nor are
    supersession links: the write path finds them afresh (memory/lifecycle/supersede.py)."""
    sources = [s if s.run_id else s.model_copy(update={"run_id": record_run_id(memory, s)}) for s in memory.sources]
    return memory.model_copy(update={
        "sources": merge_sources(sources), "flagged": screen(memory) if flagged is None else flagged,
        "released": [], "merged_ids": [], "superseded_by": "", "superseded_why": "", "supersedes": [],
        "stats": memory.stats if keep_stats else UsageStats(),
    })


def of_run(memories: Iterable[Memory | dict[str, Any]], run_id: str | None) -> list[Memory]:
    """Memories distilled from one run, every provenance entry naming that run (the graph's write back)."""
    out = [m if not isinstance(m, dict) else parse_memory(m) for m in memories]
    if not run_id:
        return out
    return [m.model_copy(update={"sources": [s.model_copy(update={"run_id": run_id}) for s in m.sources]})
            for m in out]


def merge_sources(sources: Iterable[Provenance]) -> list[Provenance]:
    """One entry per run id (the earliest when a run was recorded twice), sorted: independent of input order."""
    by_run: dict[str, Provenance] = {}
    for source in sources:
        run = source.run_id or ""
        current = by_run.get(run)
        if current is None or _order(source) < _order(current):
            by_run[run] = source
    return [by_run[run] for run in sorted(by_run)]


def _order(source: Provenance) -> tuple[str, str]:
    return source.created_at.isoformat(), source.model_dump_json()


def _max_stats(stats: Iterable[UsageStats]) -> UsageStats:
    stats = list(stats)  # the stored counts only: each run's credit entry moves to the kept point (pool.add_many)
    counts = {name: max((getattr(s, name) for s in stats), default=0) for name in (*COUNTS, "shown_since_cited")}
    return UsageStats(**counts, last_shown=max((s.last_shown for s in stats if s.last_shown), default=None))


@dataclass
class AddResult:
    """What happened to one memory given to `add_many`."""

    id: str
    status: Status
    """added: a new memory in the pool; merged: its run joined a memory with the same normalised content;
    identical: exactly this memory (and run) was already there."""
    merged_into: str | None = None
    """The memory that now holds this one's provenance (merged / identical)."""
    flagged: list[str] = field(default_factory=list)
    """Screening reasons: a flagged memory is stored but not retrieved until released."""


class AddReport(list[AddResult]):
    """One AddResult per memory given, in order, plus the counts that explain "N runs -> M memories"."""

    def ids(self, status: Status) -> list[str]:
        return [r.id for r in self if r.status == status]

    @property
    def counts(self) -> dict[str, int]:
        counts = {s: len(self.ids(s)) for s in ("added", "merged", "identical")}  # type: ignore[arg-type]
        return {**counts, "flagged": sum(bool(r.flagged) for r in self)}

    def summary(self) -> dict[str, Any]:
        """JSON-friendly: counts and ids per status, and the flagged ids with their reasons."""
        return {**{s: self.ids(s) for s in ("added", "merged", "identical")},  # type: ignore[arg-type]
                "flagged": {r.id: r.flagged for r in self if r.flagged}, "counts": self.counts}


@dataclass
class MergePlan:
    """What add_many must write: memories to store (new or changed) and stored ids absorbed by another."""

    write: list[Memory] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    report: AddReport = field(default_factory=AddReport)
    stored_ids: set[str] = field(default_factory=set)
    """Ids already in the pool (a write to one of them is a payload update, not a new point)."""


def plan_merges(items: list[Memory], stored: dict[str, dict[str, Memory]],
                keys: list[str] | None = None) -> MergePlan:
    """Merge prepared items with the stored memories of the same dedup keys (stored: key -> id -> memory); keys:
    the items' dedup keys, when the caller has them already."""
    plan = MergePlan(stored_ids={mid for group in stored.values() for mid in group})
    results: list[AddResult | None] = [None] * len(items)
    groups: dict[str, list[int]] = {}
    for index, key in enumerate(keys if keys is not None else map(dedup_key, items)):
        groups.setdefault(key, []).append(index)
    for key, indexes in groups.items():
        old = stored.get(key, {})
        members = [*old.values(), *(items[i] for i in indexes)]
        keep = min(m.id for m in members)
        kept = _merged(keep, old, [items[i] for i in indexes], members)
        if keep not in old or kept.model_dump() != old[keep].model_dump():
            plan.write.append(kept)
        plan.delete += [mid for mid in old if mid != keep]
        seen = set(old)
        for i in indexes:
            item = items[i]
            if item.id in seen:
                results[i] = AddResult(item.id, "identical", keep, item.flagged)
            elif not old and item.id == keep:
                results[i] = AddResult(item.id, "added", None, item.flagged)
            else:
                results[i] = AddResult(item.id, "merged", keep, item.flagged)
            seen.add(item.id)
    plan.report = AddReport(r for r in results if r is not None)
    return plan


def _merged(keep: str, old: dict[str, Memory], new: list[Memory], members: list[Memory]) -> Memory:
    base = old.get(keep) or next(m for m in new if m.id == keep)
    stats = _max_stats([*(stored_stats(m) for m in old.values()), *(m.stats for m in new)])
    merged_ids = sorted({*(i for m in members for i in m.merged_ids), *(m.id for m in members)} - {keep})
    update: dict[str, Any] = {"sources": merge_sources(s for m in members for s in m.sources), "stats": stats,
                              "merged_ids": merged_ids}
    if keep not in old:  # a new content replaces the stored one: a release still covers the reasons it released
        released = sorted({r for m in old.values() for r in m.released})
        if released and set(base.flagged) <= set(released):
            update.update(flagged=[], released=released)
        # the same content under a smaller id must not escape the stored one's quarantine or archive
        quarantined = sorted({r for m in old.values() for r in m.quarantined})
        if quarantined:
            update["quarantined"] = sorted({*base.quarantined, *quarantined})
        archived = next((m.archived for m in old.values() if m.archived), "")
        if archived and not base.archived:
            update["archived"] = archived
        superseded = next((m for m in old.values() if m.superseded_by), None)  # nor a supersession
        if superseded is not None and not base.superseded_by:
            update.update(superseded_by=superseded.superseded_by, superseded_why=superseded.superseded_why)
        supersedes = sorted({i for m in old.values() for i in m.supersedes})
        if supersedes:
            update["supersedes"] = sorted({*base.supersedes, *supersedes})
    kept = base.model_copy(update=update)
    kept._stored_stats = None  # its stats are now the merged stored counts
    return kept
