"""MemoryPool: one shared pool of memories over Qdrant (embedded Edge, embedded client, or a server)."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from datetime import datetime
from typing import Any, Iterable, Iterator, Literal

from langchain_core.embeddings import Embeddings

from mtl_graph.memory.dedup import AddReport, AddResult, dedup_key, plan_merges, prepared
from mtl_graph.memory.engine.embeddings import EmbeddingError, embeddings_name, resolve_embeddings
from mtl_graph.memory.engine.location import (
    EmbeddingMismatchError,
    OpenedStore,
    PoolError,
    PoolLockedError,
    location_of,
    open_directory,
    open_server,
)
from mtl_graph.memory.engine.namespace import DEFAULT_NAMESPACE, NamespacedStore, NamespaceError, check_namespace
from mtl_graph.memory.base import (
    MAX_SHORT,
    Change,
    Memory,
    MemoryType,
    Outcome,
    memory_type_of,
    parse_memory,
)
from mtl_graph.memory.pool.files import ImportReport, PoolFiles
from mtl_graph.memory.lifecycle.ops import CreditReport, PoolLifecycle, Retrieval
from mtl_graph.memory.lifecycle.policy import BaseRate, LifecycleConfig
from mtl_graph.memory.lifecycle.supersede import (Conflict, SupersedeConfig, can_supersede, check_conflict,
                                                  newer_of, proven_against, supersedable)
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.pool.points import RETRIEVERS, SearchHit, is_uuid, memory_of, payload_of
from mtl_graph.memory.pool.query_cache import QueryVectorCache
from mtl_graph.memory.pool.stats import CountedStore, stats_file
from mtl_graph.memory.usage import CREDIT_KEY, TALLY_KEY, Use, credit_update
from mtl_graph.memory.screening.screen import released, rescreened, screen_many
from mtl_graph.memory.pool.search import PREFETCH, RankedHit, ranked_search
from mtl_graph.memory.engine.storage import Conditions, PayloadFields, QuerySpec, RawHit, StoredPoint

__all__ = ["MemoryPool", "AddResult", "AddReport", "SearchHit", "SearchFilter", "ImportReport", "PoolError",
           "PoolLockedError", "EmbeddingMismatchError", "NamespaceError", "CreditReport", "Retrieval"]




CHANGES_KEPT = 1000
"""A memory's newest status changes kept (the oldest go first)."""


def _appended(changes: list[Change], change: Change) -> list[Change]:
    return [*changes, change][-CHANGES_KEPT:]


@dataclass
class _Shared:
    """One directory's engine, shared by the pools of its namespaces in this process."""

    opened: OpenedStore
    embeddings: str
    write_lock: Any
    pools: int = 0


class _CurrentMemories:
    """The memories of a supersession pass as stored now: read in one fetch, read again after a link changed one
    (what reading each pair afresh gives, without an engine call per pair)."""

    def __init__(self, pool: "MemoryPool", ids: list[str]) -> None:
        self._pool = pool
        self._raw = {h.id: h for h in pool.fetch(list(dict.fromkeys(ids)))} if ids else {}
        self._parsed: dict[str, Memory] = {}

    def get(self, memory_id: str) -> Memory | None:
        if memory_id not in self._parsed:
            if memory_id not in self._raw:
                return None
            self._parsed[memory_id] = memory_of(self._raw[memory_id])
        return self._parsed[memory_id]

    def changed(self, *ids: str) -> None:
        for memory_id in ids:
            self._raw.pop(memory_id, None)
            self._parsed.pop(memory_id, None)
        for hit in self._pool.fetch(list(ids)):
            self._raw[hit.id] = hit
            self._parsed.pop(hit.id, None)


class MemoryPool(PoolFiles):
    """Add, search and manage memories. Open with `MemoryPool.open(location)`.

    A pool is one namespace of its location: every read and write goes through `store`, a NamespacedStore. The
    online loop (credit, quarantine, retrieval with the lifecycle) is `lifecycle`, a PoolLifecycle given this
    pool; `credit`, `retrieve`, `quarantined` and the like hand over to it."""

    _open_pools: dict[tuple[str, str], "MemoryPool"] = {}
    _shared: dict[str, _Shared] = {}
    _registry_lock = threading.Lock()

    def __init__(self, opened: OpenedStore, embeddings: Embeddings, location: str,
                 namespace: str = DEFAULT_NAMESPACE, write_lock: Any = None) -> None:
        from qdrant_edge import Bm25  # a local BM25 tokenizer: sparse vectors without any download

        self._opened = opened
        self.namespace = check_namespace(namespace)
        self.store = CountedStore(opened.store, self.namespace, stats_file(opened.directory, self.namespace),
                                  opened.shared)
        """Every read and write of the namespace; its writes keep the maintained statistics (memory/pool/stats.py)."""
        self.maintained = self.store.maintained
        """The namespace's counts, format sizes, base rate and floors, kept current on write (memory/pool/stats.py)."""
        self.dim = opened.dim
        self.engine = opened.engine
        self.embeddings = embeddings
        self.location = location
        self._bm25 = Bm25()
        self._refs = 1
        self.write_lock = write_lock if write_lock is not None else threading.RLock()
        """Held while writing; one per directory: the namespaces of one engine take turns, as one pool's writers do."""
        self._query_cache = QueryVectorCache()
        self.embedding_seconds = 0.0
        """Time this handle spent in its embedder's document calls (ingest reports its throughput without it)."""
        self.lifecycle = PoolLifecycle(self)
        """The online loop on this handle: credit, quarantine, release, retrieval with re-ranking and the floor."""

    @classmethod
    def open(cls, location: str | Path = ":memory:", embeddings: Embeddings | str | None = None, *,
             engine: Literal["edge", "client"] | None = None, api_key: str | None = None,
             namespace: str | None = None) -> "MemoryPool":
        """Open (or create) a pool at ":memory:", a directory, or an http(s):// Qdrant URL, in one namespace
        (default: MTL_NAMESPACE, else "default"); the pool sees and changes that namespace's memories only.

        Within one process, opening the same directory and namespace again returns the same pool."""
        from mtl_graph.core.environment import process_settings

        settings = process_settings()
        # MTL_NAMESPACE is the run setting `namespace` (unset: the default namespace)
        namespace = check_namespace(namespace if namespace is not None else settings.namespace or DEFAULT_NAMESPACE)
        location = location_of(location, "MemoryPool.open")
        emb = resolve_embeddings(embeddings if embeddings is not None else settings.embeddings)
        if location.startswith(("http://", "https://")):
            return cls(open_server(location, emb, api_key or settings.qdrant_api_key), emb, location, namespace)
        if location == ":memory:":
            return cls(open_directory(None, emb, engine or settings.engine), emb, location, namespace)
        key = str(Path(location).expanduser().resolve())
        with cls._registry_lock:
            pool = cls._open_pools.get((key, namespace))
            shared = cls._shared.get(key)
            if shared is not None and embeddings_name(emb) != shared.embeddings:
                raise EmbeddingMismatchError(
                    f"pool {key} is open with embeddings {shared.embeddings!r}, not {embeddings_name(emb)!r}")
            if pool is not None:
                pool._refs += 1
                return pool
            if shared is None:
                opened = open_directory(Path(key), emb, engine or settings.engine)
                shared = cls._shared[key] = _Shared(opened, embeddings_name(emb), threading.RLock())
            pool = cls(shared.opened, emb, key, namespace, shared.write_lock)
            shared.pools += 1
            cls._open_pools[(key, namespace)] = pool
            return pool

    def in_namespace(self, namespace: str) -> "MemoryPool":
        """This pool's engine seen through another namespace: a view sharing the engine and its write lock (close
        this pool, not the view). A run whose settings name a namespace reads and writes through one."""
        namespace = check_namespace(namespace)
        if namespace == self.namespace:
            return self
        return MemoryPool(self._opened, self.embeddings, self.location, namespace, self.write_lock)

    def close(self) -> None:
        """Release this handle; the pool closes when the last handle in the process is released (its engine when
        the last namespace open on it closes)."""
        with self._registry_lock:
            self._refs -= 1
            if self._refs > 0:
                return
            shared = self._shared.get(self.location)
            if self._open_pools.get((self.location, self.namespace)) is self:
                del self._open_pools[(self.location, self.namespace)]
                shared.pools -= 1
                if shared.pools > 0:
                    return
                del self._shared[self.location]
        self.store.close()
        self._opened.release()

    def namespaces(self) -> dict[str, int]:
        """Memories per namespace of the pool's location, by name (counts only: the one read that looks past this
        pool's namespace)."""
        return self.store.namespaces()

    def __enter__(self) -> "MemoryPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ vectors
    def embed(self, texts: list[str]) -> list[list[float]]:
        """Document vectors for texts (one batch), each checked against the pool's vector size."""
        started = time.perf_counter()
        vectors = self.embeddings.embed_documents(texts)
        self.embedding_seconds += time.perf_counter() - started
        for v in vectors:
            if len(v) != self.dim:
                raise EmbeddingError(f"embeddings returned a vector of size {len(v)}; the pool expects {self.dim}")
        return vectors

    def _sparse(self, text: str, query: bool = False) -> tuple[list[int], list[float]]:
        vec = self._bm25.embed_query(text) if query else self._bm25.embed_document(text)
        return list(vec.indices), list(vec.values)

    # ------------------------------------------------------------------ writing
    def add(self, memory: Memory | dict[str, Any]) -> AddResult:
        """Add one memory (see `add_many`)."""
        return self.add_many([memory])[0]

    @contextmanager
    def statistics_held(self) -> Iterator[None]:
        """Every write inside, from any thread, is one change of the statistics record (memory/pool/stats.py
        `MaintainedStats.held`): an ingest's many small `add_many` calls write the record twice in all."""
        with self.maintained.held():
            yield

    def add_many(self, memories: Iterable[Memory | dict[str, Any]], keep_stats: bool = False,
                 supersede: SupersedeConfig | None = None) -> AddReport:
        """Add memories with one batch embedding; returns what happened to each (added / merged / identical).

        Every memory is screened first (see memory/screening/screen.py): a flagged one is stored but not retrieved. Memories
        merge only with the same type, outcome and normalised content (see memory/dedup.py); a merged memory keeps
        one provenance entry per source run, and the result does not depend on the order memories arrive in.
        A new memory whose advice conflicts with a near-duplicate stored one supersedes the older of the two
        (memory/lifecycle/supersede.py; `supersede` says how: the deterministic rule by default, a model when it
        names one; `SupersedeConfig(enabled=False)` skips it)."""
        from mtl_graph.redaction.redact import redact_memory  # imports detect-secrets: only when writing

        # Every write path (graph, ingest, CLI, direct API callers) redacts here, before ids and screening.
        redacted = [redact_memory(m if not isinstance(m, dict) else parse_memory(m)) for m in memories]
        # the rules per memory, the semantic screen over every memory's sentences in one embedding batch
        items = [prepared(m, keep_stats, flags) for m, flags in zip(redacted, screen_many(redacted))]
        if not items:
            return AddReport()
        with self.write_lock:
            credits: dict[str, dict[str, Any]] = {}
            keys = [dedup_key(m) for m in items]  # each item's once: the lookup and the plan both group by them
            plan = plan_merges(items, self._stored_like(items, keys, credits), keys)
            new = [m for m in plan.write if m.id not in plan.stored_ids]
            # only new points need vectors: a memory merged into, or identical to, a stored one is a payload update
            texts = list(dict.fromkeys(m.key_text() for m in new))  # runs of one task share a key: embed it once
            vectors = dict(zip(texts, self.embed(texts))) if texts else {}
            config = supersede if supersede is not None else SupersedeConfig()
            added = set(plan.report.ids("added"))
            with self.maintained.batch():  # one change of the statistics record for the whole batch, links included
                self._write_plan(plan, new, vectors, credits)
                if config.enabled and added:
                    self._supersede([m for m in plan.write if m.id in added], vectors, config)
        return plan.report

    def _write_plan(self, plan: Any, new: list[Memory], vectors: dict[str, list[float]],
                    credits: dict[str, dict[str, Any]]) -> None:
        if new:
            self.store.upsert([StoredPoint(m.id, vectors[m.key_text()], self._sparse(m.key_text()), payload_of(m))
                               for m in new])
            # Qdrant Edge indexes only when asked: once the unindexed tail is long enough this starts a build
            # in a worker process and returns (~0.1 ms otherwise; see edge_rebuild.py). Server / local
            # client: a no-op.
            self.store.optimize()
        for memory in plan.write:
            if memory.id in plan.stored_ids:
                self.store.set_payload(memory.id, payload_of(memory))
        self._move_credit(plan.write, plan.delete, credits)
        if plan.delete:
            self.store.delete(plan.delete)

    def _supersede(self, memories: list[Memory], vectors: dict[str, list[float]], config: SupersedeConfig) -> None:
        """Each new memory against its nearest stored ones of the same format and outcome: a pair whose advice
        conflicts links the older to the newer (either may be the new one: the newer is the later made).

        One engine call asks for every memory's neighbours, ids and scores only (a neighbour's payload was never
        used: the pair is read as it is now, below), grouped by filter (the engine scores a group's vectors
        together); the pairs are then decided one after another in the order of the memories and their hits, each
        on both memories as they are after the links made before it."""
        checked = [m for m in memories if supersedable(m)]
        if not checked:
            return
        live = {"archived", "superseded"}  # what can never be part of a new supersession
        order = sorted(range(len(checked)), key=lambda i: (checked[i].type, checked[i].outcome.value))
        found = self.store.query([QuerySpec(
            limit=config.candidates + 1, dense=vectors[checked[i].key_text()], with_payload=False,
            where=Conditions(equals={"type": checked[i].type, "outcome": checked[i].outcome.value},
                             excludes={"status": sorted(live)})) for i in order])
        neighbours = dict(zip(order, found))
        pairs = [(memory.id, hit.id) for i, memory in enumerate(checked) for hit in neighbours[i]
                 if hit.id != memory.id and hit.score >= config.similarity]
        current = _CurrentMemories(self, [i for pair in pairs for i in pair])
        for memory_id, other_id in pairs:
            mine, other = current.get(memory_id), current.get(other_id)
            if mine is None or other is None:
                continue
            newer, older = newer_of(mine, other)
            if not can_supersede(newer) or not supersedable(older) or proven_against(older, newer):
                continue
            conflict = check_conflict(newer, older, config)
            if conflict is not None:
                self._link(newer, older, conflict)
                current.changed(newer.id, older.id)

    def _link(self, newer: Memory, older: Memory, conflict: Conflict) -> None:
        self.store.set_payload(older.id, payload_of(older.model_copy(update={
            "superseded_by": newer.id, "superseded_why": conflict.line()[:1000]})))
        self.store.set_payload(newer.id, payload_of(newer.model_copy(update={
            "supersedes": sorted({*newer.supersedes, older.id})})))

    def superseded(self) -> list[Memory]:
        """The memories a newer, contradicting memory superseded (kept; not served with the lifecycle on)."""
        return [m for m in self if m.superseded_by]

    def restore_superseded(self, memory_id: str) -> Memory | None:
        """Reverse a supersession: the memory is served again and leaves its newer memory's `supersedes`; None when
        it is not there (a memory not superseded is returned as it is)."""
        with self.write_lock:
            memory = self.get(memory_id)
            if memory is None or not memory.superseded_by:
                return memory
            newer = self.get(memory.superseded_by)
            names = {memory.id, *memory.merged_ids}  # the newer may list it by an id merged into it since
            if newer is not None and names & set(newer.supersedes):
                self.store.set_payload(newer.id, payload_of(newer.model_copy(update={
                    "supersedes": [i for i in newer.supersedes if i not in names]})))
            memory = memory.model_copy(update={"superseded_by": "", "superseded_why": ""})
            self.store.set_payload(memory.id, payload_of(memory))
            return memory

    def _move_credit(self, kept: list[Memory], deleted: list[str], credits: dict[str, dict[str, Any]]) -> None:
        """The credit entries of memories merged away join the memory that absorbed them (before they go)."""
        for memory in kept:
            moved: dict[str, Any] = {}
            for absorbed in memory.merged_ids:
                if absorbed in deleted:
                    moved.update(credits.get(absorbed, {}))
            moved.pop(TALLY_KEY, None)  # the absorbed memory's cached tally: the kept one's is written afresh
            if moved:
                self.store.set_payload(memory.id, credit_update(credits.get(memory.id), moved), key=CREDIT_KEY)

    def _stored_like(self, items: list[Memory], item_keys: list[str],
                     credits: dict[str, dict[str, Any]]) -> dict[str, dict[str, Memory]]:
        """Stored memories sharing a dedup key with an item (key -> id -> memory), and any stored under an item's id.

        The lookup is an exact filter on the indexed dedup key, before anything is embedded: the query vector only
        orders the candidates (a key holds one stored memory, since every write merges its key), so a fixed one
        does. Points written before dedup keys existed are found by id (exact duplicates) only."""
        keys = list(dict.fromkeys(item_keys))
        found = self.store.query([QuerySpec(limit=16, where=Conditions(equals={"dedup_key": key}),
                                            dense=self._any_vector()) for key in keys]) if keys else []
        by_key = [h for hits in found for h in hits]
        seen = {h.id for h in by_key}  # an item re-added is found by its key already: read and parsed once
        missing = [i for i in dict.fromkeys(m.id for m in items) if i not in seen]
        stored: dict[str, dict[str, Memory]] = {}
        for hit in [*by_key, *(self.store.fetch(missing) if missing else [])]:
            memory = memory_of(hit)
            stored.setdefault(dedup_key(memory), {})[memory.id] = memory
            if isinstance(hit.payload.get(CREDIT_KEY), dict):
                credits[hit.id] = hit.payload[CREDIT_KEY]
        return stored

    def _any_vector(self) -> list[float]:
        """A fixed unit vector: the query of a lookup whose filter alone decides what it finds."""
        return [self.dim ** -0.5] * self.dim

    def delete(self, memory_id: str) -> bool:
        """Delete one memory; False when it was not there."""
        with self.write_lock:
            hits = self.store.fetch([memory_id])
            if not hits:
                return False
            try:
                memory = memory_of(hits[0])
            except PoolError:  # a damaged point is still deleted
                memory = None
            for older in memory.supersedes if memory is not None else []:  # nothing supersedes them any more: they are served again
                self.restore_superseded(older)
            if memory is not None and memory.superseded_by:
                self.restore_superseded(memory.id)  # leaves the newer memory's list
            self.store.delete([memory_id])
            return True

    def flagged(self) -> list[Memory]:
        """The memories write-time screening holds back from retrieval."""
        return [m for m in self if m.flagged]

    def release(self, memory_id: str) -> Memory | None:
        """Re-admit a flagged, quarantined or superseded memory to retrieval (screening reasons move to `released`,
        quarantine reasons to `quarantine_released`, with the record so far as the baseline; a supersession is
        reversed, see `restore_superseded`); None when it is not there."""
        with self.write_lock:
            memory = self.get(memory_id)
            if memory is not None and memory.flagged:
                memory = released(memory)
                self.store.set_payload(memory.id, payload_of(memory))
            if memory is not None and memory.quarantined:
                self.release_quarantine(memory)
                memory = self.get(memory.id)
            if memory is not None and memory.superseded_by:
                memory = self.restore_superseded(memory.id)
            return memory

    def archive(self, memory_id: str, why: str, *, by: str = "", change: Change | None = None) -> Memory | None:
        """Keep a memory with its record but never retrieve it again (consolidated, pruned, archived by a person);
        the change is kept in its `changes` (`change`, or an "archived" one by `by`), so `restore` can undo it.
        None when absent; an archived memory stays as it is."""
        with self.write_lock:
            memory = self.get(memory_id)
            if memory is not None and not memory.archived:
                why = why.strip()[:MAX_SHORT] or "archived"
                change = change or Change(action="archived", why=why, by=by)
                memory = memory.model_copy(update={"archived": why, "changes": _appended(memory.changes, change)})
                self.store.set_payload(memory.id, payload_of(memory))
            return memory

    def note_change(self, memory_id: str, change: Change) -> Memory | None:
        """Add a change to a memory's `changes` without changing its status (an edit's link to the memory it
        replaced); None when absent."""
        with self.write_lock:
            memory = self.get(memory_id)
            if memory is not None:
                memory = memory.model_copy(update={"changes": _appended(memory.changes, change)})
                self.store.set_payload(memory.id, payload_of(memory))
            return memory

    def restore(self, memory_id: str, *, by: str = "") -> Memory | None:
        """Serve an archived memory again (the archive reason kept in its `changes`); None when absent, a live
        memory as it is. Which memory a restore puts back in an edit's place is the lifecycle's
        (memory/lifecycle/revisions.py)."""
        with self.write_lock:
            memory = self.get(memory_id)
            if memory is not None and memory.archived:
                change = Change(action="restored", why=memory.archived, by=by)
                memory = memory.model_copy(update={"archived": "", "changes": _appended(memory.changes, change)})
                self.store.set_payload(memory.id, payload_of(memory))
            return memory

    def rescreen(self) -> list[str]:
        """Screen every memory again (new rules, or a pool written before screening); returns the newly flagged."""
        newly = []
        with self.write_lock:
            for memory in list(self):
                flags = rescreened(memory)
                if flags != memory.flagged:
                    newly += [memory.id] if flags and not memory.flagged else []
                    self.store.set_payload(memory.id, payload_of(memory.model_copy(update={"flagged": flags})))
        return newly

    def optimize(self) -> None:
        """Index every memory now and return once searches use the new index (Qdrant Edge: a build in a worker
        process, as writes start by themselves in the background; a server or local client: a no-op)."""
        self.store.optimize(wait=True)

    # ------------------------------------------------------------------ reading
    def get(self, memory_id: str) -> Memory | None:
        """One memory by id (or by the id of a near-duplicate merged into it), or None."""
        hits = self.fetch([memory_id])
        return memory_of(hits[0]) if hits else None

    def fetch(self, ids: list[str]) -> list[RawHit]:
        """The stored points for ids (payloads not parsed), each once; an id merged into another memory finds that
        memory."""
        ids = [i for i in ids if is_uuid(i)]  # an id that is not a point id is simply not in the pool
        hits = {h.id: h for h in self.store.fetch(ids)} if ids else {}
        missing = [i for i in ids if i not in hits]
        if missing:  # any vector will do: the filter on the indexed alias list is exact
            probe = [1.0] + [0.0] * (self.dim - 1)
            found = self.store.query([QuerySpec(limit=1, where=Conditions(equals={"merged_ids": i}), dense=probe)
                                      for i in missing])
            hits.update((h.id, h) for h in (f[0] for f in found if f))
        return list(hits.values())

    def count(self, type: MemoryType | str | None = None) -> int:
        """Number of memories, optionally of one type."""
        return self.store.count(Conditions(equals={"type": memory_type_of(str(type)).value}) if type else None)

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[Memory]:
        for hit in self.store.scroll():
            yield memory_of(hit)

    def stats(self) -> dict[str, dict[str, int]]:
        """Counts by type, domain, outcome, screening (flagged memories are not retrieved) and status (active,
        flagged, quarantined, superseded, archived: only active ones are retrieved with the lifecycle on)."""
        out: dict[str, dict[str, int]] = {"type": {}, "domain": {}, "outcome": {}, "screening": {}, "status": {}}
        for memory in self:
            screening = "flagged" if memory.flagged else "retrievable"
            out["screening"][screening] = out["screening"].get(screening, 0) + 1
            out["status"][memory.status] = out["status"].get(memory.status, 0) + 1
            out["type"][memory.type] = out["type"].get(memory.type, 0) + 1
            out["outcome"][memory.outcome.value] = out["outcome"].get(memory.outcome.value, 0) + 1
            for domain in memory.domains or ["(none)"]:
                out["domain"][domain] = out["domain"].get(domain, 0) + 1
        return out

    def search(self, query: str, type: MemoryType | str | None = None, k: int = 3, *,
               where: SearchFilter | None = None, retriever: str = "hybrid", min_score: float | None = None,
               exclude_domains: Iterable[str] = (), exclude_task_ids: Iterable[str] = (),
               outcome: Outcome | str | None = None, domain: str | None = None,
               only_ids: Iterable[str] | None = None, include_flagged: bool = False,
               include_quarantined: bool = True) -> list[SearchHit]:
        """Top-k memories for a query, by the ranker alone. Hybrid: dense + BM25, BM25 weighing in for identifiers
        (memory/pool/search.py); retriever: hybrid, dense (cosine only) or bm25 (keywords only); min_score is a
        floor on cosine similarity. The first k do not depend on k (up to search.PREFETCH).

        Which memories may be returned is `where`, a SearchFilter, or its fields as keywords (see SearchFilter:
        type, exclude_domains / exclude_task_ids for hold-one-out and the same-task guard, domain, outcome,
        only_ids for a subset, include_flagged, include_quarantined); not both."""
        where = SearchFilter.of(where, type, exclude_domains=exclude_domains, exclude_task_ids=exclude_task_ids,
                                outcome=outcome, domain=domain, only_ids=only_ids, include_flagged=include_flagged,
                                include_quarantined=include_quarantined)
        ranked = self.ranked(query, k, where, retriever=retriever, min_score=min_score)
        return [SearchHit(memory_of(r.raw), r.raw.score, r.similarity, r.retriever) for r in ranked]

    def ranked(self, query: str, k: int, where: SearchFilter, *, retriever: str = "hybrid",
               min_score: float | None = None, with_payload: bool = True) -> list[RankedHit]:
        """`search`'s top k before their memories are parsed (payloads read, not validated; none without
        with_payload)."""
        if not query or not query.strip():
            raise ValueError("search query is empty")
        if retriever not in RETRIEVERS:
            raise ValueError(f"unknown retriever {retriever!r}: one of {', '.join(RETRIEVERS)}")
        if k <= 0:
            return []
        dense = self.query_vector(query)
        sparse = self._sparse(query, query=True) if retriever != "dense" else None
        # the lists are as long whatever k is (up to PREFETCH): the fused order of the first k does not depend on k
        return ranked_search(self.store, dense, sparse, where.conditions(), k, max(PREFETCH, k), min_score, query,
                             bm25_only=retriever == "bm25", with_payload=with_payload)

    def retrieve(self, query: str, type: MemoryType | str | None = None, k: int = 3, *,
                 lifecycle: LifecycleConfig | None = None, where: SearchFilter | None = None,
                 retriever: str = "hybrid", min_score: float | None = None,
                 exclude_domains: Iterable[str] = (), exclude_task_ids: Iterable[str] = (),
                 outcome: Outcome | str | None = None, domain: str | None = None,
                 only_ids: Iterable[str] | None = None, include_flagged: bool = False,
                 include_quarantined: bool = True) -> Retrieval:
        """Top-k memories with the lifecycle (PoolLifecycle.retrieve): `candidates` by the ranker, quarantined
        memories left out, the relevance floor, re-ranking by utility and decay, k kept. Without a lifecycle
        config it is `search` (the research's retrieval), traced. The filter is given as for `search`."""
        where = SearchFilter.of(where, type, exclude_domains=exclude_domains, exclude_task_ids=exclude_task_ids,
                                outcome=outcome, domain=domain, only_ids=only_ids, include_flagged=include_flagged,
                                include_quarantined=include_quarantined)
        return self.lifecycle.retrieve(query, k, where, lifecycle=lifecycle, retriever=retriever,
                                       min_score=min_score)

    # ------------------------------------------------------------------ the online loop (PoolLifecycle's)
    def credit(self, run_id: str, uses: Iterable[Use], outcome: Outcome | str, source: str = "given", *,
               lifecycle: LifecycleConfig | None = None, at: datetime | None = None) -> CreditReport:
        """Record one judged run in the record of every memory it was shown (PoolLifecycle.credit)."""
        return self.lifecycle.credit(run_id, uses, outcome, source, lifecycle=lifecycle, at=at)

    def update_stats(self, ids: Iterable[str], outcome: Outcome | str) -> None:
        """Count one showing of each memory in a run that ended with `outcome` (no citation information)."""
        self.lifecycle.update_stats(ids, outcome)

    def base_rate(self) -> BaseRate:
        """Successes and failures of the credited runs the pool's memories were shown in (PoolLifecycle.base_rate)."""
        return self.lifecycle.base_rate()

    def quarantined(self) -> list[Memory]:
        """The memories the online loop stopped serving, with their evidence."""
        return self.lifecycle.quarantined()

    def release_quarantine(self, memory: Memory) -> list[str]:
        """Serve a quarantined memory again, and the descendants that followed it (PoolLifecycle.release_quarantine);
        returns the ids released."""
        return self.lifecycle.release_quarantine(memory)

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The memory's credit entries, oldest first: run, when, cited, outcome, who gave the verdict."""
        return self.lifecycle.history(memory_id)

    def near_copies(self, memories: list[Memory], among: list[str], threshold: float) -> dict[int, str]:
        """Which of `memories` (index -> id) are near copies of one of the `among` memories
        (PoolLifecycle.near_copies)."""
        return self.lifecycle.near_copies(memories, among, threshold)

    def read_fields(self, ids: list[str], fields: PayloadFields) -> list[RawHit]:
        """The stored points of `ids` (each once, in order) with the selected payload fields alone, kept in the
        process between calls where this pool is its engine's only writer (memory/pool/field_cache.py): read the
        payloads, never change them."""
        return self.store.fetch_cached(ids, fields)

    def contents_changed(self) -> None:
        """Forget what was computed from the pool's contents (after a restore, or another writer's bulk change)."""
        if self.store.cache is not None:
            self.store.cache.clear()
        self.lifecycle.contents_changed()

    def query_vector(self, query: str) -> list[float]:
        """The query's vector, from the pool's LRU cache when it was asked before."""
        vector = self._query_cache.vector(self.embeddings, query)
        if len(vector) != self.dim:
            raise EmbeddingError(f"embeddings returned a vector of size {len(vector)}; the pool expects {self.dim}")
        return vector
