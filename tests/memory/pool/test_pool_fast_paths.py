"""The pool's fast paths give the same answers as the slow ones they replaced."""

import random

import pytest

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.engine.storage import Conditions, QuerySpec
from mtl_graph.memory.pool.search import _with_cosines, fuse, names_identifier, ranked_search

TEXTS = [
    ("Run the tests after every edit", "Verification catches regressions before submitting."),
    ("Quote shell variables", "Unquoted expansions split file names with spaces."),
    ("Check the output format", "Graders compare the exact output, whitespace included."),
    ("Reproduce before fixing", "A minimal script shows the bug and later proves the fix."),
    ("Read call sites first", "Changing a signature breaks callers the tests do not cover."),
    ("Use UTC timestamps", "Naive datetimes break across daylight-saving changes."),
    ("Parse CSV with a real parser", "Quoted commas break a naive split on commas."),
    ("Fix seeds for reproducibility", "Unseeded runs make validation scores drift."),
    ("Count rows after each join", "A join fan-out silently duplicates rows in totals."),
    ("Prefer the smallest change", "Small patches are easier to verify and review."),
]
# More memories than a prefetch list holds (20), so a hit can be in one list and not the other.
SUBJECTS = ["Users", "Admins", "Guests", "New accounts", "Service accounts", "Customers", "Mobile users"]
CAUSES = ["an expired password", "a clock skew", "a cached session", "an unverified email", "a locked account",
          "a revoked token"]
TEXTS += [(f"Login trouble {i}", f"{s} are unable to log into their accounts because of {c}.")
          for i, (s, c) in enumerate((s, c) for s in SUBJECTS for c in CAUSES)]
TEXTS.insert(0, ("Numeric parsing", "The parser in check_id_42 expected an int but got a string."))  # domain d0
QUERIES = ["cannot sign in: error in check_id_42", "how do I verify my change works", "file names with spaces break my script", "check_output exact format",
           "totals are wrong after a join", "csv split on commas", "daylight saving bug in timestamps",
           # BM25 weighs in for queries that name an identifier (memory/pool/search.py): this one's memory is BM25-only
           "users are unable to log into their accounts: check_id_42"]


@pytest.fixture(params=["edge", "client"])
def pool(request, embeddings):
    p = MemoryPool.open(":memory:", embeddings, engine=request.param)
    p.add_many([InsightMemory(title=t, description=d, content=d, sources=[Provenance(domain=f"d{i % 3}")])
                for i, (t, d) in enumerate(TEXTS)])
    yield p
    p.close()


def _lists(pool, query, where, limit=20):
    return pool.store.query([
        QuerySpec(limit=limit, where=where, dense=pool.embeddings.embed_query(query)),
        QuerySpec(limit=limit, where=where, sparse=pool._sparse(query, query=True)),
    ])


def test_retriever_matches_the_separate_dense_and_bm25_lists(pool):
    """A query naming an identifier fuses both lists and says which found each hit; any other says "dense"."""
    seen = set()
    for query in QUERIES:
        hits = pool.search(query, k=5, exclude_domains=["d1"])
        where = Conditions(excludes={"domains": ["d1"], "source_task_ids": []})
        dense, sparse = _lists(pool, query, where)
        dense_ids, sparse_ids = {h.id for h in dense}, {h.id for h in sparse}
        for hit in hits:
            in_dense, in_sparse = hit.memory.id in dense_ids, hit.memory.id in sparse_ids
            expected = "both" if in_dense and in_sparse else "bm25" if in_sparse else "dense"
            assert hit.retriever == (expected if names_identifier(query) else "dense"), (query, hit.memory.title)
            seen.add(hit.retriever)
    assert seen == {"dense", "bm25", "both"}


def _previous(pool, query, k, where, min_score):
    """The search as it was before plain queries skipped the BM25 list: both lists always, fused without BM25's say."""
    dense_hits, bm25_hits = _lists(pool, query, where, max(20, k))
    fused = fuse([(h.id, h.score) for h in dense_hits], [(h.id, h.score) for h in bm25_hits], exact=False)
    return _with_cosines(pool.store, pool.embeddings.embed_query(query), fused, {h.id: h.score for h in dense_hits},
                         k, min_score)


def _plain_queries(n, seed=3):
    rng = random.Random(seed)
    words = sorted({w.strip(".,:").lower() for pair in TEXTS for w in " ".join(pair).split()} - {"check_id_42"})
    queries = []
    while len(queries) < n:
        query = " ".join(rng.sample(words, rng.randint(1, 6)))
        if not names_identifier(query):
            queries.append(query)
    return queries


def test_plain_queries_rank_as_before_and_ask_bm25_only_when_its_ids_could_enter(pool, monkeypatch):
    """Generated queries naming no identifier, over filters, k and floors: the same hits, order, scores and cosines
    as with both lists; the BM25 list is asked for exactly when fewer than k dense hits pass the floor, and then
    the labels are the fused ones too."""
    rng = random.Random(5)
    asked = []
    query_of = pool.store.query
    monkeypatch.setattr(pool.store, "query", lambda specs: asked.extend(s.sparse is not None for s in specs)
                        or query_of(specs))
    paths = set()
    for query in _plain_queries(60):
        where = Conditions(excludes={"domains": rng.sample(["d0", "d1", "d2"], rng.randint(0, 2)),
                                     "source_task_ids": []})
        k = rng.choice([1, 3, 5, 8, 25])
        min_score = rng.choice([None, None, 0.1, 0.3, 0.5, 0.9])
        before = _previous(pool, query, k, where, min_score)
        del asked[:]
        dense = pool.embeddings.embed_query(query)
        after = ranked_search(pool.store, dense, pool._sparse(query, query=True), where, k, max(20, k), min_score,
                              query)
        assert [(h.raw.id, h.raw.score, h.similarity, h.raw.payload) for h in after] == \
            [(h.raw.id, h.raw.score, h.similarity, h.raw.payload) for h in before], query
        bm25_asked = any(asked)
        dense_hits = _lists(pool, query, where, max(20, k))[0]
        passing = sum(1 for h in dense_hits if min_score is None or h.score >= min_score)
        paths.add(bm25_asked)
        assert bm25_asked == (passing < k), (query, k, min_score)
        assert [h.retriever for h in after] == ([h.retriever for h in before] if bm25_asked else ["dense"] * len(after))
    assert paths == {True, False}  # both branches ran


NEW = InsightMemory(title="Something new", description="A memory not seen before.", content="Nothing like it.")


def test_writes_ask_the_engine_to_index(pool, monkeypatch):
    calls = []
    monkeypatch.setattr(pool.store, "optimize", lambda: calls.append(1))
    pool.add(NEW)
    assert calls == [1]
    pool.add(NEW)
    assert calls == [1]  # nothing written, nothing to index


def _cosine(a, b):
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_every_hit_reports_its_true_cosine_whichever_list_found_it(pool):
    found = set()
    for query in QUERIES:
        q = pool.embeddings.embed_query(query)
        for hit in pool.search(query, k=8):
            found.add(hit.retriever)
            assert hit.similarity == pytest.approx(_cosine(q, pool.embeddings.embed_query(hit.memory.key_text())),
                                                   abs=1e-4), (query, hit.retriever)
    assert "bm25" in found  # the vector-reading path for BM25-only hits ran


def test_min_score_drops_hits_below_it_from_either_list(pool):
    for query in QUERIES:
        every = pool.search(query, k=20)
        floor = sorted(h.similarity for h in every)[len(every) // 2]
        kept = pool.search(query, k=20, min_score=floor)
        assert [h.memory.id for h in kept] == [h.memory.id for h in every if h.similarity >= floor]


def test_the_shards_tally_counts_exactly_through_overwrites_deletes_indexing_and_reopening(tmp_path):
    """The unfiltered count comes from Edge's own tally, not an exact count request: it must stay exact."""
    import numpy as np

    from mtl_graph.memory.engine.edge.indexing import EdgeIndexConfig
    from mtl_graph.memory.engine.edge.edge_store import EdgeStore
    from mtl_graph.memory.engine.storage import StoredPoint

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((900, 8)).astype(np.float32).tolist()

    def points(ids):
        return [StoredPoint(f"00000000-0000-0000-0000-{i:012d}", vectors[i], ([i % 50], [1.0]), {"type": "insight"})
                for i in ids]

    def exact(store):
        return store.shard.count(store._q.CountRequest(exact=True))

    # tiny thresholds, so the points go through background index builds and swaps
    config = EdgeIndexConfig(rebuild_min_points=100, full_scan_threshold_kb=1)
    store = EdgeStore(str(tmp_path / "shard"), 8, config)
    steps = [lambda: store.upsert(points(range(600))), lambda: store.upsert(points(range(500, 900))),
             lambda: store.optimize(wait=True), lambda: store.delete([p.id for p in points(range(0, 900, 3))]),
             lambda: store.delete([p.id for p in points(range(0, 30))]), lambda: store.optimize(wait=True),
             lambda: store.upsert(points(range(0, 12)))]
    for step in steps:
        step()
        assert store.count() == exact(store)
    assert store.count() == 900 - 300 - 20 + 12 and store.indexed == 580  # the second build: before the 12
    store.close()
    reopened = EdgeStore(str(tmp_path / "shard"), 8, config)
    assert reopened.count() == exact(reopened) == 592
    reopened.close()
