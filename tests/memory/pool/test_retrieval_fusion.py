"""The hybrid fusion (memory/pool/search.py): its properties, exact identifiers, and MemoryPool.search's default order."""

import json

import numpy as np
import pytest

from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.search import fuse, names_identifier, rrf
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.engine.storage import QuerySpec
from helpers.paths import ROOT

CASES = json.loads((ROOT / "benchmarks" / "data" / "identifier_cases.json")
                   .read_text(encoding="utf-8"))
DENSE = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
BM25 = [("x", 12.0), ("c", 3.0), ("y", 2.5), ("a", 2.0)]


def test_fusion_is_deterministic_and_reports_which_list_found_each_point():
    fused = fuse(DENSE, BM25)
    assert fused == fuse(list(DENSE), list(BM25))
    assert {p: r for p, _, r in fused} == {"a": "both", "c": "both", "b": "dense", "d": "dense", "x": "bm25",
                                           "y": "bm25"}
    scores = [s for _, s, _ in fused]
    assert scores == sorted(scores, reverse=True)


def test_a_point_in_both_lists_adds_its_two_normalised_scores():
    fused = {p: s for p, s, _ in fuse(DENSE, BM25)}
    dense_only, bm25_only = dict((p, s) for p, s, _ in fuse(DENSE, [])), dict((p, s) for p, s, _ in fuse([], BM25))
    assert fused["a"] == pytest.approx(dense_only["a"] + bm25_only["a"])
    assert fused["a"] > fused["b"]  # found by both beats found by one at a similar place
    assert fused["x"] == pytest.approx(bm25_only["x"])  # a far outlier of the BM25 list keeps its lead there


def test_ties_keep_the_dense_order_then_the_bm25_order():
    flat = [("p", 0.5), ("q", 0.5)]
    assert [p for p, _, _ in fuse(flat, [("r", 1.0), ("s", 1.0)])] == ["p", "q", "r", "s"]
    assert all(s == 0.5 for _, s, _ in fuse(flat, []))  # a flat list has no spread: every point gets the middle
    assert [p for p, _, _ in rrf(["p", "q"], ["q", "p"])] == ["p", "q"]


def test_empty_lists():
    assert fuse([], []) == [] and fuse([], [], exact=False) == [] and rrf([], []) == []
    assert [(p, r) for p, _, r in fuse(DENSE, [])] == [("a", "dense"), ("b", "dense"), ("c", "dense"), ("d", "dense")]
    assert [(p, r) for p, _, r in fuse([], BM25)] == [("x", "bm25"), ("c", "bm25"), ("y", "bm25"), ("a", "bm25")]


def test_without_an_identifier_bm25_has_no_weight_but_is_still_reported():
    fused = fuse(DENSE, BM25, exact=False)
    assert [p for p, _, _ in fused] == ["a", "b", "c", "d", "x", "y"]
    assert [r for _, _, r in fused] == ["both", "dense", "both", "dense", "bm25", "bm25"]
    assert [s for p, s, _ in fused if p in "xy"] == [0.0, 0.0]


@pytest.mark.parametrize("text", ["ERR_SSL_PROTOCOL_ERROR", "pytest --maxfail=1", "useEffect", "ProcessBuilder",
                                  "parse.go", "os.replace", "E0502", "TS2345", "ENOSPC", "SIGPIPE", "fsync()",
                                  "max_connections", "run it with -rf"])
def test_identifiers_are_recognised(text):
    assert names_identifier(f"it fails with {text} again")


@pytest.mark.parametrize("text", ["", "   ", "my tests fail sometimes", "a one-liner, e.g. with awk", "equals 2.3",
                                  "the A/B test", "HTTP 500 from the CSV API", "Users cannot sign in."])
def test_plain_words_acronyms_and_numbers_are_not_identifiers(text):
    assert not names_identifier(text)


def _seed(pool):
    memories = [InsightMemory(title=t, description=d, content=d) for t, d in [c["memory"] for c in CASES["cases"]]]
    pool.add_many(memories + [InsightMemory(title=t, description=d, content=d) for t, d in CASES["distractors"]])
    return memories


def _old_rrf_rank(pool, query, target):
    where = SearchFilter().conditions()  # what MemoryPool.search filters by
    dense, bm25 = pool.store.query([
        QuerySpec(limit=20, where=where, dense=pool.query_vector(query), with_payload=False),
        QuerySpec(limit=20, where=where, sparse=pool._sparse(query, query=True), with_payload=False)])
    order = [p for p, _, _ in rrf([h.id for h in dense], [h.id for h in bm25])]
    return order.index(target) if target in order else 99


def test_identifier_queries_rank_their_memories_at_least_as_well_as_the_old_rrf(pool):
    memories = _seed(pool)
    new_ranks, old_ranks, dense_ranks = [], [], []
    for memory, case in zip(memories, CASES["cases"]):
        assert names_identifier(case["query"]), case["query"]
        got = [h.memory.id for h in pool.search(case["query"], k=3)]
        dense = [h.memory.id for h in pool.search(case["query"], k=3, retriever="dense")]
        new_ranks.append(got.index(memory.id) if memory.id in got else 99)
        dense_ranks.append(dense.index(memory.id) if memory.id in dense else 99)
        old_ranks.append(_old_rrf_rank(pool, case["query"], memory.id))
    # case by case the two fusions may swap a memory between first and second; over the set DBSF is no worse
    assert sum(r == 0 for r in new_ranks) >= sum(r == 0 for r in old_ranks), (new_ranks, old_ranks)
    assert sum(1 / (r + 1) for r in new_ranks) >= sum(1 / (r + 1) for r in old_ranks), (new_ranks, old_ranks)
    assert all(r < 3 for r in new_ranks), new_ranks  # every identifier memory is in the top 3
    assert sum(r < 3 for r in dense_ranks) < len(memories)  # which dense alone does not manage: BM25 is why


def test_a_bm25_only_hit_reports_its_cosine_and_the_floor_applies_to_it(pool):
    _seed(pool)
    # 24 sign-in memories fill the dense list (20 long at k 5), so an identifier's memory is only BM25's
    pool.add_many([InsightMemory(title=f"Sign-in trouble {i}", description=f"{who} cannot log in because of {why}.",
                                 content="-")
                   for i, (who, why) in enumerate((w, y) for w in ["Users", "Admins", "Guests", "Customers"]
                                                  for y in ["a clock skew", "a cached session", "an expired password",
                                                            "a locked account", "a revoked token", "a typo"])])
    found = False
    for query in [c["query"] for c in CASES["cases"]] + ["authentication failing for every account: SIGPIPE"]:
        q = np.asarray(pool.query_vector(query))
        every = pool.search(query, k=5)
        for hit in every:
            key = np.asarray(pool.embeddings.embed_query(hit.memory.key_text()))
            assert hit.similarity == pytest.approx(float(q @ key / np.linalg.norm(q) / np.linalg.norm(key)), abs=1e-4)
            found |= hit.retriever == "bm25"
        floor = sorted(h.similarity for h in every)[len(every) // 2]
        kept = pool.search(query, k=5, min_score=floor)
        above = [h.memory.id for h in every if h.similarity >= floor]
        assert [h.memory.id for h in kept][:len(above)] == above  # in order; lower ones may take the freed places
        assert all(h.similarity >= floor for h in kept)
    assert found  # the vector-reading path for BM25-only hits ran


def test_default_search_on_a_small_pool_puts_the_lesson_first_and_follows_dense_for_plain_questions(pool):
    memories = _seed(pool)
    plain = ["the database rejects clients when traffic is high", "which error comes first in a long build log?",
             "my server cannot start because the port is taken"]
    for query in plain:
        assert not names_identifier(query)
        default = [(h.memory.id, h.similarity) for h in pool.search(query, k=5)]
        assert default == [(h.memory.id, h.similarity) for h in pool.search(query, k=5, retriever="dense")]
        sims = [s for _, s in default]
        assert sims == sorted(sims, reverse=True)
    top = pool.search("the page will not open and shows ERR_SSL_PROTOCOL_ERROR", k=3)
    assert top[0].memory.id == memories[0].id and top[0].retriever == "both"


def test_an_empty_query_is_refused_in_one_line_and_changes_nothing(pool):
    _seed(pool)
    before = pool.count()
    with pytest.raises(ValueError, match="^search query is empty$"):
        pool.search("  \n ")
    assert pool.count() == before
