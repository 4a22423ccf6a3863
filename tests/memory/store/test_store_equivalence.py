"""PoolStore against LangGraph's InMemoryStore: hundreds of seeded random operations (half through the async API),
every result compared.

The reference is InMemoryStore with the choices PoolStore documents where InMemoryStore has none (docs/store.md):
- listing without a query is newest write first (InMemoryStore: insertion order), so the reference sorts its full
  result by write order, then pages;
- with a query, items without an embedded text come after every scored item, paged with them (InMemoryStore
  fills a short page with them, ignoring the offset);
- only namespaces that hold items are listed (InMemoryStore keeps an emptied one, and a `get` creates one), and
  an overwrite drops the old vectors (InMemoryStore keeps them): the reference prunes both;
- InMemoryStore has no TTL: the reference deletes an item once the test's clock passes its expiry, refreshing
  the expiry on reads as TTLConfig says.
Both stores get the same `index` embed function; scores within 1e-5 are ties, compared as sets.
"""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from langgraph.store.memory import InMemoryStore

from mtl_graph.memory.store.pool_store import PoolStore

DIMS = 24
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()
_TABLE = np.random.default_rng(7).normal(size=(len(WORDS), DIMS))
LABELS = ["users", "alice", "bob", "notes", "prefs", "team-1", "x"]
TIE = 1e-5


def embed(texts: list[str]) -> list[list[float]]:
    """A bag-of-words embedding: deterministic, fast, identical texts tie exactly."""
    out = []
    for text in texts:
        v = np.zeros(DIMS)
        for word in text.split():
            v += _TABLE[WORDS.index(word)] if word in WORDS else 0.1
        out.append(v.tolist())
    return out


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


class Reference:
    """InMemoryStore plus the documented ordering, pruning and TTL bookkeeping."""

    def __init__(self, clock: Clock, default_ttl: float | None, refresh_on_read: bool) -> None:
        self.mem = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["text"]})
        self.clock, self.default_ttl, self.refresh_on_read = clock, default_ttl, refresh_on_read
        self.tick: dict[tuple, int] = {}
        self.expiry: dict[tuple, tuple[datetime, float]] = {}
        self.unswept: set[tuple] = set()
        self.writes = 0
        self.expired = 0

    def expire(self) -> None:
        for k, (when, _) in list(self.expiry.items()):
            if when <= self.clock.now:
                self._drop(k)
                self.unswept.add(k)
                self.expired += 1
        for ns in [ns for ns, items in self.mem._data.items() if not items]:
            del self.mem._data[ns]

    def _drop(self, k: tuple) -> None:
        self.mem.delete(*k)
        self.mem._vectors[k[0]].pop(k[1], None)
        self.tick.pop(k, None)
        self.expiry.pop(k, None)

    def put(self, ns, key, value, index, ttl) -> None:
        k = (ns, key)
        self.unswept.discard(k)  # the store overwrites (or deletes) an expired, unswept row in place
        if value is None:
            self._drop(k)
            return
        self.mem._vectors[ns].pop(key, None)
        self.mem.put(ns, key, value, index=index)
        self.writes += 1
        self.tick[k] = self.writes
        minutes = self.default_ttl if ttl == "default" else ttl
        self.expiry.pop(k, None)
        if minutes:
            self.expiry[k] = (self.clock.now + timedelta(minutes=minutes), minutes)

    def refresh(self, keys, refresh) -> None:
        refresh = self.refresh_on_read if refresh is None else refresh
        for k in keys:
            if refresh and k in self.expiry:
                self.expiry[k] = (self.clock.now + timedelta(minutes=self.expiry[k][1]), self.expiry[k][1])

    def get(self, ns, key, refresh):
        item = self.mem.get(ns, key)
        self.expire()  # the get may have created an empty namespace
        if item is not None:
            self.refresh([(ns, key)], refresh)
        return item

    def full_search(self, prefix, query, flt):
        """Every match in the documented order, with scores (None: no embedded text)."""
        hits = self.mem.search(prefix, query=query, filter=flt, limit=10**6)
        scored = [h for h in hits if h.score is not None]
        rest = sorted((h for h in hits if h.score is None), key=lambda h: -self.tick[(tuple(h.namespace), h.key)])
        if query is None:
            return rest
        return [*scored, *rest]


def _groups(ranked) -> dict[tuple, int]:
    """(namespace, key) -> tie group: consecutive scores within TIE share one; unscored items share one."""
    out, group, last = {}, 0, object()
    for h in ranked:
        if h.score is None:
            same = last is None
        else:
            same = isinstance(last, float) and abs(h.score - last) <= TIE
        group += 0 if same else 1
        last = h.score
        out[(tuple(h.namespace), h.key)] = group
    return out


def compare_search(got, ranked, offset, limit, step) -> None:
    want = ranked[offset:offset + limit]
    assert len(got) == len(want), (step, len(got), len(want))
    groups = _groups(ranked)
    by_key = {(tuple(h.namespace), h.key): h for h in ranked}
    keys = [(tuple(h.namespace), h.key) for h in got]
    assert len(set(keys)) == len(keys), step
    for g, w in zip(got, want):
        k = (tuple(g.namespace), g.key)
        assert k in by_key, (step, k)
        assert g.value == by_key[k].value, step
        assert groups[k] == groups[(tuple(w.namespace), w.key)], (step, k, g.score, w.key, w.score)
        if g.score is not None or by_key[k].score is not None:
            assert g.score == pytest.approx(by_key[k].score, abs=1e-4), step


def _namespace(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.choice(LABELS) for _ in range(rng.randint(1, 3)))


def _value(rng: random.Random) -> dict:
    value = {"n": rng.randint(0, 9), "score": round(rng.uniform(0, 1), 2), "color": rng.choice(["red", "blue"]),
             "tags": rng.sample(WORDS, rng.randint(0, 2)), "meta": {"lang": rng.choice("ab")}}
    if rng.random() < 0.8:  # some items have nothing to embed: they rank after the scored ones
        value["text"] = " ".join(rng.choice(WORDS[:8]) for _ in range(rng.randint(1, 3)))
    return value


def _filter(rng: random.Random) -> dict | None:
    return rng.choice([
        None, None, {"color": rng.choice(["red", "blue"])}, {"n": {"$gt": rng.randint(0, 9)}},
        {"n": {"$gte": 2, "$lt": rng.randint(3, 9)}}, {"score": {"$lte": 0.5}}, {"color": {"$ne": "red"}},
        {"n": {"$eq": rng.randint(0, 9)}}, {"meta": {"lang": "a"}}, {"tags": []}, {"missing": None},
        {"color": "blue", "n": {"$lt": 5}},
    ])


def _condition(rng: random.Random, known: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    if rng.random() < 0.4 or not known:
        return None
    ns = list(rng.choice(known))
    part = ns[:rng.randint(1, len(ns))] if rng.random() < 0.5 else ns[-rng.randint(1, len(ns)):]
    if rng.random() < 0.3:
        part[rng.randrange(len(part))] = "*"
    return tuple(part)


@pytest.mark.parametrize("engine,seed,refresh_on_read", [("edge", 11, True), ("client", 12, False)])
def test_random_operations_match_in_memory_store(engine: str, seed: int, refresh_on_read: bool) -> None:
    rng = random.Random(seed)
    clock = Clock()
    ttl = {"default_ttl": 30.0, "refresh_on_read": refresh_on_read}
    ref = Reference(clock, ttl["default_ttl"], ttl["refresh_on_read"])
    store = PoolStore.open(":memory:", engine=engine, index={"dims": DIMS, "embed": embed, "fields": ["text"]},
                           ttl=ttl, clock=clock)
    loop, api = asyncio.new_event_loop(), random.Random(seed + 1)  # its own stream: the op sequence stays put

    def call(name: str, *args, **kwargs):
        """Half the operations go through the async API (abatch), half through the sync one (batch)."""
        if api.random() < 0.5:
            return getattr(store, name)(*args, **kwargs)
        return loop.run_until_complete(getattr(store, f"a{name}")(*args, **kwargs))

    written: list[tuple[tuple[str, ...], str]] = []
    counts: dict[str, int] = {}
    peak = 0
    try:
        for step in range(450):
            clock.now += timedelta(seconds=rng.choice([0, 0, 5, 20, 90]))
            peak = max(peak, len(ref.tick))
            ref.expire()
            kind = rng.choices(["put", "delete", "get", "search", "query", "list", "sweep"],
                               [30, 6, 14, 14, 14, 10, 2])[0]
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "put":
                k = rng.choice(written) if written and rng.random() < 0.3 else (_namespace(rng), rng.choice("abcdef"))
                written.append(k)
                value, index = _value(rng), rng.choice([None, None, False, ["tags[*]"], ["text", "meta.lang"]])
                minutes = rng.choice(["default", None, None, 2, 10])
                if minutes == "default":
                    call("put", *k, value, index=index)
                else:
                    call("put", *k, value, index=index, ttl=minutes)
                ref.put(*k, value, index, minutes)
            elif kind == "delete":
                k = rng.choice(written) if written else (("x",), "a")
                call("delete", *k)
                ref.put(*k, None, None, None)
            elif kind == "get":
                k = rng.choice(written) if written and rng.random() < 0.8 else (_namespace(rng), "zz")
                refresh = rng.choice([None, True, False])
                got, want = call("get", *k, refresh_ttl=refresh), ref.get(*k, refresh)
                assert (got is None) == (want is None), (step, k)
                if got is not None:
                    assert (tuple(got.namespace), got.key, got.value) == (tuple(want.namespace), want.key, want.value)
            elif kind in ("search", "query"):
                prefix = _namespace(rng)[:rng.randint(0, 2)]
                query = " ".join(rng.choice(WORDS[:8]) for _ in range(2)) if kind == "query" else None
                flt, limit, offset = _filter(rng), rng.choice([1, 3, 10, 50]), rng.choice([0, 0, 1, 4])
                refresh = rng.choice([None, False])
                got = call("search", prefix, query=query, filter=flt, limit=limit, offset=offset, refresh_ttl=refresh)
                ranked = ref.full_search(prefix, query, flt)
                compare_search(got, ranked, offset, limit, step)
                counts["scored"] = counts.get("scored", 0) + any(h.score is not None for h in got)
                counts["paged"] = counts.get("paged", 0) + (len(ranked) > offset + limit)
                ref.refresh([(tuple(h.namespace), h.key) for h in got], refresh)
            elif kind == "list":
                known = [tuple(ns) for ns in ref.mem._data]
                prefix, suffix = _condition(rng, known), _condition(rng, known)
                depth, limit, offset = rng.choice([None, 1, 2]), rng.choice([2, 5, 100]), rng.choice([0, 0, 1, 3])
                got = call("list_namespaces", prefix=prefix, suffix=suffix, max_depth=depth, limit=limit, offset=offset)
                want = ref.mem.list_namespaces(prefix=prefix, suffix=suffix, max_depth=depth, limit=limit,
                                               offset=offset)
                assert got == want, (step, prefix, suffix, depth)
                counts["listed"] = counts.get("listed", 0) + bool(got)
            else:
                assert store.sweep_ttl() == len(ref.unswept), step
                ref.unswept.clear()
    finally:
        store.close()
        loop.close()
    # the sequence exercised every kind of operation, and TTLs did expire items along the way
    assert min(counts.values()) >= 5 and len(counts) == 10, counts
    assert ref.expired >= 20 and peak >= 30, (ref.expired, peak)
