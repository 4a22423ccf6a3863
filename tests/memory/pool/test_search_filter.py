"""SearchFilter: the one typed value a search's filter travels as (pool/filter.py), checked when it is made; and
searches whose first hits do not depend on how many were asked."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats import FormatError
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.pool.pool import MemoryPool
from helpers.paths import ROOT


def test_a_filter_is_normalised_once_and_frozen():
    where = SearchFilter(type="Insight", outcome="success", exclude_domains=["sql"], only_ids=["a", "b"], domain="")
    assert (where.type, where.outcome, where.domain) == ("insight", "success", None)
    assert where.exclude_domains == ("sql",) and where.only_ids == ("a", "b") and where.exclude_task_ids == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        where.type = "trajectory"  # type: ignore[misc]
    assert SearchFilter(exclude_domains=["x"]) == SearchFilter(exclude_domains=("x",))  # equal by value


@pytest.mark.parametrize(("fields", "error", "message"), [
    ({"exclude_domains": "sql"}, TypeError, r"exclude_domains must be a list of names, not the single string 'sql'"),
    ({"exclude_task_ids": [1]}, TypeError, r"exclude_task_ids must hold names \(strings\), not int '1'"),
    ({"only_ids": 7}, TypeError, r"only_ids must be a list of names, not int '7'"),
    ({"outcome": "won"}, ValueError, r"outcome must be one of success, failure, unknown, not 'won'"),
    ({"type": "recipe"}, FormatError, r"unknown memory type 'recipe'"),
    ({"type": 3}, TypeError, r"type must be a format name, not int '3'"),
    ({"domain": ["sql"]}, TypeError, r"domain must be a domain name"),
    ({"include_flagged": "yes"}, TypeError, r"include_flagged must be True or False, not str 'yes'"),
])
def test_a_bad_value_is_a_clear_error(fields, error, message):
    with pytest.raises(error, match=message):
        SearchFilter(**fields)


def test_the_engine_conditions_say_what_the_fields_do():
    where = SearchFilter(type="insight", domain="sql", exclude_task_ids=["t1"], include_quarantined=False)
    c = where.conditions()
    assert c.equals == {"type": "insight", "domains": "sql"} and c.only_ids is None
    assert c.excludes == {"domains": [], "source_task_ids": ["t1"], "flagged": ["true"],
                          "status": ["archived", "quarantined"]}
    assert "flagged" not in SearchFilter(include_flagged=True).conditions().excludes
    assert SearchFilter().without_quarantined() == SearchFilter(include_quarantined=False)


def test_where_or_keywords_not_both():
    where = SearchFilter(exclude_domains=("sql",))
    assert SearchFilter.of(where, exclude_domains=(), include_flagged=False) is where  # defaults are not "given"
    assert SearchFilter.of(None, "insight", exclude_domains=["sql"]) == SearchFilter(type="insight",
                                                                                      exclude_domains=("sql",))
    with pytest.raises(ValueError, match=r"either as `where` or as keywords, not both \(exclude_task_ids given"):
        SearchFilter.of(where, exclude_task_ids=["t"])
    with pytest.raises(TypeError, match="where must be a SearchFilter, not dict"):
        SearchFilter.of({"type": "insight"})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def crowded():
    """More memories than a prefetch list holds, several naming one identifier."""
    with MemoryPool.open(":memory:") as pool:
        pool.add_many([InsightMemory(title=f"Parser note {i}", description=f"When parse_header fails on input {i}.",
                                     content=f"Check parse_header's handling of case {i} and rerun the tests.",
                                     sources=[Provenance(domain=("a", "b", "c")[i % 3], source_task_id=f"t{i}")])
                       for i in range(30)]
                      + [InsightMemory(title=f"Unrelated {i}", description=f"When the build is slow ({i}).",
                                       content="Cache the dependencies between builds.") for i in range(15)])
        yield pool


def test_the_search_and_retrieve_take_the_filter_either_way(crowded):
    query = "parse_header raises on an empty line"
    by_keywords = crowded.search(query, type="insight", k=5, exclude_domains=["a"])
    by_where = crowded.search(query, k=5, where=SearchFilter(type="insight", exclude_domains=("a",)))
    assert [h.memory.id for h in by_keywords] == [h.memory.id for h in by_where]
    assert all("a" not in h.memory.domains for h in by_where)
    found = crowded.retrieve(query, k=5, where=SearchFilter(exclude_domains=("a",)))
    assert [h.memory.id for h in found.hits] == [h.memory.id for h in by_where]
    with pytest.raises(ValueError, match="not both"):
        crowded.retrieve(query, k=5, where=SearchFilter(), domain="b")


@pytest.mark.parametrize("retriever", ["hybrid", "dense", "bm25"])
@pytest.mark.parametrize("query", ["parse_header raises on an empty line", "the build is slow every time"])
def test_the_first_hits_do_not_depend_on_k(crowded, retriever, query):
    ranked = {k: [h.memory.id for h in crowded.search(query, k=k, retriever=retriever)] for k in (1, 3, 8, 20)}
    for k, ids in ranked.items():
        assert ids == ranked[20][:k], (k, ids, ranked[20])
    on = crowded.retrieve(query, k=3, retriever=retriever, lifecycle=LifecycleConfig(relevance_floor=-1))
    assert [h.memory.id for h in on.hits] == ranked[20][:3]  # 20 candidates, no evidence: the ranker's top 3


def test_an_identifier_query_ranks_its_first_hits_alike_at_any_k(pool):
    """The lists fused used to grow with k (max(20, 4k)): on this pool the lifecycle's 20 candidates put another
    memory in the top 3 than a search for 3 did."""
    cases = json.loads((ROOT / "benchmarks" / "data" / "identifier_cases.json")
                       .read_text(encoding="utf-8"))
    pool.add_many([InsightMemory(title=t, description=d, content=d)
                   for t, d in [c["memory"] for c in cases["cases"]] + cases["distractors"]])
    pool.add_many([InsightMemory(title=f"Sign-in trouble {i}", description=f"{who} cannot log in because of {why}.",
                                 content="-")
                   for i, (who, why) in enumerate((w, y) for w in ["Users", "Admins", "Guests", "Customers"]
                                                  for y in ["a clock skew", "a cached session", "an expired password",
                                                            "a locked account", "a revoked token", "a typo"])])
    query = "authentication failing for every account: SIGPIPE"
    top3 = [h.memory.id for h in pool.search(query, k=3)]
    assert [h.memory.id for h in pool.search(query, k=20)][:3] == top3
    on = pool.retrieve(query, k=3, lifecycle=LifecycleConfig(relevance_floor=-1))
    assert [h.memory.id for h in on.hits] == top3
