"""Consolidation and pruning: near-duplicates merged into one memory, stale memories archived; nothing deleted.

Clusters. Per (type, outcome), live memories (not archived, quarantined, superseded or flagged) are compared. A
full pass compares a group of at most `exact_below` memories all pairs, in numpy blocks of `block` rows, and a
larger one within cells of about `cell_size` memories (partition.py: k-means cells, each memory in its `probes`
nearest, so the work grows linearly with the group). `compare(incremental=True)` takes only the memories the last
applied pass did not mark (added or changed since; `finish` writes the marks) and compares each with its nearest
live neighbours in the pool's dense index (neighbours.py: batched queries, longer lists while all are duplicates);
`full_pass="index"` makes a full pass do the same for every memory. Every pair at or above `threshold` joins its
two memories (union-find: single link), so a cluster is a connected component; members and clusters are in id
order. `ConsolidateConfig(exact=True)` compares all pairs whatever the size (time grows with the square of the
group).
A cluster larger than `max_cluster` is reported, not merged: single link can chain loosely related memories, and a
higher threshold splits it.

Proposals. A format a model writes (insight, workflow, summary) gets one merged memory written by a model from the
originals (the format's `consolidate_prompt`, prompts/consolidate_<type>.md, the originals fenced as data; the
structured call validates its draft schema, retries and reports a failure for that cluster alone). A format built
without a model (trajectory) needs none here either: its representative is the original with the best record
(most cited successes, then most shown, then the smallest id), kept in place.
The merged memory carries the union of the originals' sources, `consolidated_from` = their ids, and the sum of
their records as its stored counts.

Apply. Under the pool's write lock the originals are read again (one that changed since the proposal fails the
cluster), their records summed afresh, the merged memory added (`add_many(keep_stats=True)`) and every original
archived ("consolidated into <id>"). The originals keep their own credit entries; archived memories are never
retrieved, so no run counts twice in ranking. A merged memory with the same content as an original (the
trajectory representative, or a model that repeated one) updates that original in place instead. Running it
again finds nothing new: the originals are archived and the merged memory stands alone.

Prune rule (`stale`): a live memory is stale when
  1. it was shown at least `min_shown` times (default 20) and never cited: agents keep seeing it and never use
     it; or
  2. its utility (lifecycle.utility) is at least `utility_margin` (default 0.2) below the pool's base rate, with
     at least `min_evidence` weighted runs (default 10): it keeps being present in runs that fail.
Flagged and quarantined memories are left to a person (`mtl memories release`); archived ones are done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import reduce
from typing import Any, Callable, Iterable, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mtl_graph.memory.dedup import dedup_key, merge_sources
from mtl_graph.memory.lifecycle.policy import LifecycleConfig, evidence, utility
from mtl_graph.memory import formats
from mtl_graph.memory.base import Memory, MemoryType, Outcome, UsageStats, first_validation_error, memory_type_of
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.usage import RECORD_FIELDS, record_of, stored_stats
from mtl_graph.memory.lifecycle import neighbours as nb
from mtl_graph.memory.lifecycle.partition import partitioned_pairs
from mtl_graph.memory.pool.points import memory_of, payload_of
from mtl_graph.memory.engine.storage import Conditions, QuerySpec, point_batches
from mtl_graph.core.templates import render_template
from mtl_graph.core.errors import MTLError

Progress = Callable[[int, int], None]
"""Called with (done, total) as long work advances."""
_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


class ConsolidateConfig(BaseModel):
    """How near-duplicates are found and merged."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    threshold: float = Field(default=0.9, gt=0.0, le=1.0)
    """Cosine of key-text vectors at or above which two memories are near-duplicates."""
    max_cluster: int = Field(default=25, ge=2, le=1000)
    """Largest cluster merged; a larger one is reported (raise the threshold to split it)."""
    neighbours: int = Field(default=16, ge=1, le=1000)
    """Nearest neighbours each memory first asks the dense index for (more are asked for while all are duplicates)."""
    max_neighbours: int = Field(default=1024, ge=1, le=100_000)
    """Most neighbours one memory asks for: a tighter group larger than this may be seen in parts."""
    batch: int = Field(default=256, ge=1, le=4096)
    """Memories whose neighbour queries go to the engine in one batch."""
    hnsw_ef: int = Field(default=128, ge=16, le=4096)
    """HNSW beam width of the neighbour queries (docs/benchmarks.md: pairs missed against time, per value)."""
    exact: bool = False
    """Compare all pairs instead (numpy blocks, time grows with the square of the pool: small pools, checks)."""
    exact_below: int = Field(default=20_000, ge=0, le=100_000)
    """A full pass compares a type and outcome of at most this many live memories all pairs (exact, and cheap at
    that size: docs/benchmarks.md); 0: never."""
    full_pass: Literal["partition", "index"] = "partition"
    """How a full pass compares a larger group: within k-means cells (linear in the group), or by one dense-index
    query per memory (as an incremental pass does)."""
    cell_size: int = Field(default=300, ge=2, le=100_000)
    """A partitioned full pass: memories per cell (work per memory grows with it, and the chance that two
    near-duplicates share a cell too)."""
    probes: int = Field(default=2, ge=1, le=16)
    """A partitioned full pass: the nearest cells each memory joins (work grows with its square; 1 parts
    near-duplicates at cell borders)."""
    block: int = Field(default=512, ge=16, le=8192)
    """Exact comparison: rows of the similarity matrix computed at once (memory: block x group size floats)."""
    max_attempts: int = Field(default=3, ge=1, le=10)
    """Model calls per cluster before it is reported as failed."""
    json_mode: bool | None = None
    """Force JSON-text answers (True), tool calling (False), or pick by model capability (None)."""


class PruneConfig(BaseModel):
    """When a memory is stale (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    min_shown: int = Field(default=20, ge=1, le=1_000_000)
    """Showings without a single citation that make a memory stale."""
    min_evidence: float = Field(default=10.0, ge=1.0, le=1_000_000.0)
    """Weighted runs (lifecycle.evidence) before a low utility makes a memory stale."""
    utility_margin: float = Field(default=0.2, gt=0.0, le=1.0)
    """How far below the pool's base rate a memory's utility must be."""


@dataclass
class Cluster:
    """Near-duplicates of one type and outcome, in id order."""

    type: MemoryType
    outcome: Outcome
    memories: list[Memory]
    similarity: float
    """The lowest cosine between two members (how tight the cluster is)."""

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.memories]


@dataclass
class Proposal:
    """The memory that would replace a cluster, or why there is none."""

    cluster: Cluster
    merged: Memory | None = None
    error: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    """Model tokens spent (input, output)."""


@dataclass
class ApplyReport:
    """What apply did per cluster."""

    applied: list[tuple[list[str], str]] = field(default_factory=list)
    """(original ids, the merged memory's id)."""
    failed: list[tuple[list[str], str]] = field(default_factory=list)
    """(original ids, why nothing was changed for them)."""


class ConsolidationError(MTLError, RuntimeError):
    """One cluster could not be merged (the others go on)."""


# ------------------------------------------------------------------ clusters
def _live(memory: Memory) -> bool:
    # a superseded memory's advice was contradicted: merging it would bring that advice back
    return not (memory.archived or memory.quarantined or memory.flagged or memory.superseded_by)


def _vectors(pool: Any, ids: list[str], batch: int = 256) -> np.ndarray:
    rows: dict[str, list[float]] = {}
    for start in range(0, len(ids), batch):
        rows.update((h.id, h.dense) for h in pool.store.fetch(ids[start:start + batch], with_dense=True)
                    if h.dense is not None)
    matrix = np.asarray([rows.get(i) or [0.0] * pool.dim for i in ids], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)  # a point without a vector matches nothing


def _group(pool: Any, where: Conditions) -> tuple[list[str], np.ndarray]:
    """A group's ids in order and their unit vectors (one scroll, each batch's vectors read as one array)."""
    ids, parts = [], []
    for batch in point_batches(pool.store, where=where):
        ids.extend(batch.ids)
        parts.append(np.asarray(batch.dense, dtype=np.float32))
    if not ids:
        return [], np.zeros((0, pool.dim), dtype=np.float32)
    order = np.argsort(np.asarray(ids))
    matrix = np.concatenate(parts)[order]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return [ids[i] for i in order.tolist()], matrix / np.where(norms > 0, norms, 1.0)  # no vector: matches nothing


def _components(vectors: np.ndarray, threshold: float, block: int,
                tick: Callable[[int], None]) -> list[list[int]]:
    parent = list(range(len(vectors)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for start in range(0, len(vectors), block):
        sims = vectors[start:start + block] @ vectors[start:].T  # the upper triangle from this block down
        rows, cols = np.nonzero(sims >= threshold)
        above = cols > rows  # each pair once, never a memory with itself
        for r, c in zip(rows[above].tolist(), cols[above].tolist()):
            a, b = root(start + r), root(start + c)
            if a != b:
                parent[max(a, b)] = min(a, b)
        tick(min(block, len(vectors) - start))
    groups: dict[int, list[int]] = {}
    for i in range(len(vectors)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


@dataclass
class Pass:
    """What one comparison of the pool found, and which memories it compared (see `finish`)."""

    clusters: list[Cluster]
    compared: list[str]
    """The memories compared (an incremental pass: those without the current mark)."""
    threshold: float
    incremental: bool
    requeried: int = 0
    """Memories whose neighbour list was all duplicates and was asked for again, longer."""


def _cluster(pool: Any, type_name: str, outcome: str, ids: list[str]) -> Cluster:
    members = [memory_of(h) for h in sorted(pool.store.fetch(ids), key=lambda h: h.id)]
    vectors = _vectors(pool, [m.id for m in members])
    sub = vectors @ vectors.T
    return Cluster(MemoryType(type_name), Outcome(outcome), members,
                   float(sub[np.triu_indices(len(members), k=1)].min()))


def compare(pool: Any, type: MemoryType | str | None = None, threshold: float = 0.9, *, incremental: bool = False,
            config: ConsolidateConfig | None = None, on_progress: Progress | None = None) -> Pass:
    """Near-duplicate clusters of live memories, per type and outcome, in a deterministic order: each memory
    compared with its nearest neighbours in the pool's dense index (memory/lifecycle/neighbours.py); with
    `incremental`, only the memories the last applied pass at this threshold did not mark (new or changed since)."""
    if not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be a cosine above 0 and at most 1, not {threshold!r}")
    config = (config or ConsolidateConfig()).model_copy(update={"threshold": float(threshold)})
    if config.exact and incremental:
        raise ValueError("an exact (all-pairs) comparison is a full pass: drop exact or incremental")
    kind = memory_type_of(str(type)) if type else None
    todo = {group: nb.unmarked(nb.live(*group), config.threshold) if incremental else nb.live(*group)
            for group in nb.groups(kind.value if kind else None)}
    sizes = {group: pool.store.count(where) for group, where in todo.items()}
    total = sum(sizes.values())
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if on_progress:
            on_progress(done, total)

    clusters, compared, requeried = [], [], 0
    for (type_name, outcome), where in todo.items():
        size = sizes[(type_name, outcome)]
        if config.exact or (not incremental and size <= config.exact_below):
            ids, vectors = _group(pool, where)
            groups = [[ids[i] for i in g] for g in _components(vectors, config.threshold, config.block,
                                                                tick)] if len(ids) > 1 else []
            tick(len(ids) if len(ids) < 2 else 0)
            compared.extend(ids)
        elif not incremental and config.full_pass == "partition":
            ids, vectors = _group(pool, where)
            pairs = partitioned_pairs(vectors, config.threshold, cell_size=config.cell_size, probes=config.probes,
                                      block=config.block, tick=tick)
            groups = nb.components((ids[a], ids[b]) for a, b in pairs.tolist())
            compared.extend(ids)
        else:
            edges = nb.scan(pool.store, nb.live(type_name, outcome), pool.store.scroll_points(where=where),
                            config.threshold, neighbours=config.neighbours, max_neighbours=config.max_neighbours,
                            batch=config.batch, hnsw_ef=config.hnsw_ef, tick=tick)
            groups, requeried = nb.components(edges.pairs), requeried + edges.requeried
            compared.extend(edges.compared)
        clusters.extend(_cluster(pool, type_name, outcome, ids) for ids in groups)
    clusters.sort(key=lambda c: (c.type.value, c.outcome.value, c.ids[0]))
    return Pass(clusters, compared, config.threshold, incremental, requeried)


def find_clusters(pool: Any, type: MemoryType | str | None = None, threshold: float = 0.9, *,
                  incremental: bool = False, config: ConsolidateConfig | None = None,
                  on_progress: Progress | None = None) -> list[Cluster]:
    """The clusters of `compare` (a full pass unless `incremental`)."""
    return compare(pool, type, threshold, incremental=incremental, config=config, on_progress=on_progress).clusters


def finish(pool: Any, done: Pass, on_progress: Progress | None = None) -> int:
    """After the pass's clusters were applied: mark the memories it compared, except every cluster's members (a
    merged one is archived, a representative was rewritten, an unmerged one must be compared again), so the next
    incremental pass skips them. Returns how many were marked. A dry run must not call it."""
    clustered = {i for cluster in done.clusters for i in cluster.ids}
    todo = [i for i in done.compared if i not in clustered]
    return nb.mark(pool, todo, done.threshold, (lambda n: on_progress(n, len(todo))) if on_progress else None)


# ------------------------------------------------------------------ proposals
def summed(memories: Iterable[Memory]) -> UsageStats:
    """The records of memories added up (in the order they were last shown, so the latest streak continues)."""
    ordered = sorted(memories, key=lambda m: (m.stats.last_shown or _EPOCH, m.id))
    return reduce(lambda a, b: a.plus(b), (m.stats for m in ordered), UsageStats())


def representative(memories: Iterable[Memory]) -> Memory:
    """The original with the best record: most cited successes, then most shown, then the smallest id."""
    return min(memories, key=lambda m: (-m.stats.cited_success, -m.stats.retrieved, m.id))


def _validated(cls: type, data: dict[str, Any]) -> Memory:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise ConsolidationError(f"invalid merged memory ({first_validation_error(exc)})") from None


def merged_memory(content: Memory, originals: list[Memory]) -> Memory:
    """content (a draft or the representative) as the cluster's merged memory: the originals' sources, ids and
    summed records."""
    data = content.model_dump()
    data.update(sources=[s.model_dump() for s in merge_sources(s for m in originals for s in m.sources)],
                consolidated_from=sorted({*content.consolidated_from, *(m.id for m in originals)} - {content.id}),
                stats=summed(originals).model_dump(), archived="", merged_ids=content.merged_ids)
    return _validated(type(content), data)


def model_written(type: MemoryType | str) -> bool:
    """Whether a model writes the merged memory of a cluster of this format."""
    return formats.get(str(type)).needs_model


def _messages(cluster: Cluster, fmt: formats.MemoryFormat) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    from mtl_graph.memory.fence import fence_memories

    assert fmt.consolidate_prompt is not None
    fenced = fence_memories(cluster.memories, observation_chars=300)
    prompt = render_template(formats.CONSOLIDATE_PROMPTS, fmt.consolidate_prompt, fmt.prompt_dir,
                             count=len(cluster.memories), outcome=cluster.outcome.value, boundary=fenced.boundary,
                             memories=fenced.text)
    return [SystemMessage(render_template("mtl_graph.memory.lifecycle", "consolidate_system")), HumanMessage(prompt)]


def propose(cluster: Cluster, model: Any = None, config: ConsolidateConfig | None = None) -> Proposal:
    """The merged memory for one cluster; a failure (no model, a bad answer, too large) is in `error`."""
    config = config or ConsolidateConfig()
    if len(cluster.memories) > config.max_cluster:
        return Proposal(cluster, error=f"{len(cluster.memories)} memories exceed max_cluster "
                                       f"{config.max_cluster}: raise the threshold to split the cluster")
    try:
        fmt = formats.get(cluster.type.value)
        if not fmt.needs_model:
            return Proposal(cluster, merged_memory(representative(cluster.memories), cluster.memories))
        if fmt.consolidate_prompt is None or fmt.draft is None:
            return Proposal(cluster, error=f"{fmt.name} memories declare no merge prompt: they are not consolidated")
        if model is None:
            return Proposal(cluster, error=f"a model is needed to merge {cluster.type.value} memories (--model)")
        from mtl_graph.llm.chat import chat_model
        from mtl_graph.llm.structured import StructuredCallError, structured_call

        try:
            result = structured_call(chat_model(model), fmt.draft, _messages(cluster, fmt),
                                     max_attempts=config.max_attempts, json_mode=config.json_mode)
        except StructuredCallError as exc:
            return Proposal(cluster, error=f"no valid answer from the model: {exc.errors[-1] if exc.errors else exc}",
                            usage=exc.usage.model_dump())
        draft = _validated(fmt.memory,
                           {**result.value.model_dump(), "type": cluster.type.value, "outcome": cluster.outcome})
        return Proposal(cluster, merged_memory(draft, cluster.memories), usage=result.usage.model_dump())
    except ConsolidationError as exc:
        return Proposal(cluster, error=str(exc))


def propose_all(clusters: list[Cluster], model: Any = None, config: ConsolidateConfig | None = None,
                on_progress: Progress | None = None) -> list[Proposal]:
    """One proposal per cluster, in order (a failed one does not stop the rest)."""
    out = []
    for n, cluster in enumerate(clusters, 1):
        out.append(propose(cluster, model, config))
        if on_progress:
            on_progress(n, len(clusters))
    return out


# ------------------------------------------------------------------ apply
def _current(pool: Any, ids: list[str]) -> list[Memory]:
    out = []
    for memory_id in ids:
        memory = pool.get(memory_id)
        if memory is None or memory.id != memory_id:
            raise ConsolidationError(f"memory {memory_id} is no longer in the pool: run consolidate again")
        if not _live(memory):
            raise ConsolidationError(f"memory {memory_id} is {memory.status} since the proposal: run consolidate "
                                     "again")
        out.append(memory)
    return out


def _apply_one(pool: Any, proposal: Proposal) -> str:
    from mtl_graph.redaction.redact import redact_memory  # detect-secrets: only when writing
    from mtl_graph.memory.screening.screen import screen

    assert proposal.merged is not None
    ids = proposal.cluster.ids
    with pool.write_lock:  # nothing credited between the sum and the archive (credit takes the same lock)
        originals = _current(pool, ids)
        merged = merged_memory(redact_memory(proposal.merged), originals)  # the records as they are now
        key = dedup_key(merged)
        same = next((m for m in originals if dedup_key(m) == key), None)
        if same is not None:  # same content as an original: that one absorbs the others where it stands
            others = [m for m in originals if m.id != same.id]
            kept = merged_memory(same, originals)
            kept = kept.model_copy(update={"stats": stored_stats(same).plus(summed(others))})
            kept._stored_stats = None  # its own credit entries stay in its payload and are added when read
            pool.store.set_payload(same.id, payload_of(kept))
            new_id = same.id
        else:
            probe = [1.0] + [0.0] * (pool.dim - 1)
            [clash] = pool.store.query([QuerySpec(limit=1, where=Conditions(equals={"dedup_key": key}),
                                                  dense=probe)])
            if clash or pool.store.fetch([merged.id]):
                other = clash[0].id if clash else merged.id
                raise ConsolidationError(f"the merged memory repeats stored memory {other}")
            flags = screen(merged)
            if flags:
                raise ConsolidationError(f"screening flagged the merged memory: {'; '.join(flags)}")
            [result] = pool.add_many([merged], keep_stats=True)
            new_id = result.merged_into or result.id
            others = originals
        for memory in others:
            pool.archive(memory.id, f"consolidated into {new_id}")
    return new_id


def apply(pool: Any, proposals: Iterable[Proposal], on_progress: Progress | None = None) -> ApplyReport:
    """Write every proposal that has a merged memory; the others (and any that fail now) are reported."""
    report, proposals = ApplyReport(), list(proposals)
    for n, proposal in enumerate(proposals, 1):
        try:
            if proposal.merged is None:
                raise ConsolidationError(proposal.error or "no merged memory")
            report.applied.append((proposal.cluster.ids, _apply_one(pool, proposal)))
        except ConsolidationError as exc:
            report.failed.append((proposal.cluster.ids, str(exc)))
        if on_progress:
            on_progress(n, len(proposals))
    return report


# ------------------------------------------------------------------ prune
def usage_of(payload: dict[str, Any]) -> UsageStats:
    """A point's counts for the prune rule, read from its payload without parsing the memory: its stored counts
    plus its credit entries' tally (usage.record_of; the payload may hold RECORD_FIELDS alone)."""
    return record_of(payload)


def stale(pool: Any, config: PruneConfig | None = None,
          lifecycle: LifecycleConfig | None = None) -> list[tuple[Memory, str]]:
    """Live memories the prune rule (module docstring) finds stale, each with why, in id order. The engine
    filters the live ones and hands over their records alone (RECORD_FIELDS, not the memories' text); only the
    stale ones are read whole and parsed."""
    config, lifecycle = config or PruneConfig(), lifecycle or LifecycleConfig()
    base: float | None = None
    found: dict[str, str] = {}
    live = SearchFilter(include_quarantined=False, include_superseded=False).conditions()
    for hit in pool.store.scroll(where=live, fields=RECORD_FIELDS):
        s, why = usage_of(hit.payload), ""
        if s.retrieved >= config.min_shown and s.cited == 0:
            why = (f"pruned: shown {s.retrieved} times, never cited (rule: shown >= {config.min_shown} times "
                   "without a citation)")
        elif (weight := evidence(s, lifecycle)) >= config.min_evidence:
            base = pool.base_rate().rate if base is None else base
            value = utility(s, base, lifecycle)
            if value <= base - config.utility_margin:
                why = (f"pruned: utility {value:.2f} against the pool's base rate {base:.2f} over {weight:.1f} "
                       f"weighted runs (rule: at least {config.utility_margin:.2f} below with >= "
                       f"{config.min_evidence:g} runs)")
        if why:
            found[hit.id] = why
    out = []
    for start in range(0, len(found), 256):
        for hit in pool.store.fetch(list(found)[start:start + 256]):
            memory = memory_of(hit)
            if _live(memory):  # the payload's status fields and the memory agree (a damaged point is skipped)
                out.append((memory, found[hit.id]))
    return sorted(out, key=lambda pair: pair[0].id)


def prune(pool: Any, found: Iterable[tuple[Memory, str]]) -> list[str]:
    """Archive each stale memory with its reason; returns the ids archived."""
    out = []
    for memory, why in found:
        archived = pool.archive(memory.id, why)
        if archived is not None and archived.archived == why:
            out.append(memory.id)
    return out
