"""Near-duplicate candidates from the pool's own dense index, and the per-memory mark of what a pass compared.

Candidates. Per (type, outcome), each memory to compare asks the pool's dense index for its nearest live
neighbours of the same type and outcome (one batched query per `batch` memories, the namespace and the live filter
applied by the engine): a pair at or above the threshold is an edge. A memory whose every returned neighbour is
still above the threshold asks again with twice the limit (up to `max_neighbours`), so a tight group of any size
up to that cap is seen whole. The work is one query per memory, so a pass grows with the pool (times the index's
log factor), where comparing all pairs grew with its square. On an unindexed segment (a small or freshly written
pool) the engine's search is exact, so the edges are exactly the pairs at or above the threshold; on an HNSW
segment a pair can be missed when neither memory finds the other (docs/benchmarks.md measures how often).

Marks. A pass that was applied writes `COMPARED_KEY` = `marker(threshold)` on every memory it compared and did
not leave in an unmerged cluster. Every rewrite of a memory through `payload_of` (a status change, a release, a
restore, a merge) writes the key empty, so a changed memory is compared again by construction; a credit entry is
merged under its own key and leaves the mark alone (credit does not move a memory's vector or status). An
incremental pass compares only the live memories without the current mark. That is enough: two marked live
memories of one group were compared when the later of them was, and any pair at the threshold then was merged
(its members archived) or left unmerged (its members unmarked). Because the mark is a field of each point, a
snapshot restores it with the contents it describes, another process's writes reset it on the points they write,
and a pool never compared (or written before marks existed) has none: its first incremental pass is a full one.
A different threshold is a different mark, so it compares everything again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator

from mtl_graph.memory import formats
from mtl_graph.memory.base import Outcome
from mtl_graph.memory.engine.storage import Conditions, QuerySpec, StoredPoint
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.pool.points import COMPARED_KEY


def marker(threshold: float) -> str:
    """The mark a pass at this threshold leaves on the memories it compared."""
    return f"cosine>={threshold:.6f}"


def live(type_name: str, outcome: str) -> Conditions:
    """Live memories of one type and outcome: what retrieval with the lifecycle serves (not archived, quarantined,
    superseded or flagged), as the engine filters them."""
    return SearchFilter(type=type_name, outcome=outcome, include_quarantined=False,
                        include_superseded=False).conditions()


def unmarked(where: Conditions, threshold: float) -> Conditions:
    """`where`, less the memories a pass at this threshold already compared."""
    return replace(where, excludes={**where.excludes, COMPARED_KEY: [marker(threshold)]})


def groups(type_name: str | None = None) -> list[tuple[str, str]]:
    """Every (type, outcome) a pass compares within, in order."""
    names = [type_name] if type_name else sorted(formats.names())
    return [(t, o.value) for t in names for o in sorted(Outcome, key=lambda o: o.value)]


@dataclass
class Edges:
    """The pairs at or above the threshold that one group's scan found, and the memories it compared."""

    compared: list[str] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    requeried: int = 0
    """Memories that asked again with a larger limit (a group larger than the first limit)."""


def scan(store, where: Conditions, todo: Iterable[StoredPoint], threshold: float, *, neighbours: int,
         max_neighbours: int, batch: int, hnsw_ef: int, tick: Callable[[int], None]) -> Edges:
    """The edges from each memory of `todo` to its live neighbours in `where` (see the module docstring)."""
    out = Edges()
    for chunk in _chunks(iter(todo), batch):
        limits = {p.id: neighbours + 1 for p in chunk}  # + 1: a memory finds itself first
        pending = [p for p in chunk if p.dense]  # a point without a vector matches nothing
        while pending:
            found = store.query([QuerySpec(limit=limits[p.id], where=where, dense=p.dense, with_payload=False,
                                           hnsw_ef=hnsw_ef)
                                 for p in pending])
            again = []
            for point, hits in zip(pending, found):
                above = [h.id for h in hits if h.score >= threshold and h.id != point.id]
                if len(hits) == limits[point.id] and hits[-1].score >= threshold and \
                        limits[point.id] <= max_neighbours:
                    # every neighbour returned is a duplicate: there may be more
                    limits[point.id] = min(2 * limits[point.id], max_neighbours + 1)
                    again.append(point)
                    continue
                out.pairs.extend((point.id, other) for other in above)
            out.requeried += len(again)
            pending = again
        out.compared.extend(p.id for p in chunk)
        tick(len(chunk))
    return out


def _chunks(points: Iterator[StoredPoint], size: int) -> Iterator[list[StoredPoint]]:
    chunk: list[StoredPoint] = []
    for point in points:
        chunk.append(point)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def components(pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Connected components of the pairs (single link), each in id order, in order of their first id."""
    parent: dict[str, str] = {}

    def root(i: str) -> str:
        parent.setdefault(i, i)
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    found: dict[str, list[str]] = {}
    for i in list(parent):
        found.setdefault(root(i), []).append(i)
    return sorted((sorted(g) for g in found.values() if len(g) > 1), key=lambda g: g[0])


def mark(pool, ids: list[str], threshold: float, on_progress: Callable[[int], None] | None = None,
         batch: int = 1000) -> int:
    """Write the pass's mark on these memories (under the pool's write lock, `batch` points per engine
    operation); returns how many."""
    value = {COMPARED_KEY: marker(threshold)}
    with pool.write_lock:
        for start in range(0, len(ids), batch):
            pool.store.set_payload_many(ids[start:start + batch], value)
            if on_progress:
                on_progress(min(len(ids), start + batch))
    return len(ids)
