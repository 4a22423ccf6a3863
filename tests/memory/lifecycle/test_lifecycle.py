"""The online loop on a real embedded pool with the local embedder: credit, utility, quarantine, floor, decay."""

import itertools
import threading

import pytest
from pydantic import ValidationError

from mtl_graph.memory.lifecycle.policy import LifecycleConfig, utility, wilson_upper
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.points import payload_of
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.usage import CREDIT_KEY, Use

from helpers.memory_fixtures import CODING_ADVICE as CODING


def insight(title, description, task="t", domain="d"):
    return InsightMemory(title=title, description=description, content=description,
                         sources=[Provenance(domain=domain, source_task_id=task)])


@pytest.fixture()
def coding_pool(embeddings):
    with MemoryPool.open(":memory:", embeddings) as pool:
        pool.add_many([insight(t, d, task=f"t{i}") for i, (t, d) in enumerate(CODING)])
        yield pool


def ids_of(hits):
    return [h.memory.id for h in hits]


def run_ids():
    return (f"run-{n}" for n in itertools.count())


def test_credit_under_eight_threads_is_exact_and_a_repeated_run_counts_once(pool):
    a, b = insight(*CODING[0]), insight(*CODING[1])
    pool.add_many([a, b])
    per_thread = 25

    def work(t):
        for n in range(per_thread):
            run = f"thread{t}-run{n}"
            outcome = "success" if n % 5 else "failure"
            pool.credit(run, [Use(a.id, cited=n % 2 == 0), Use(b.id, cited=False)], outcome, "tests")
            pool.credit(run, [Use(a.id, cited=n % 2 == 0), Use(b.id, cited=False)], outcome, "tests")  # retried

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sa, sb = pool.get(a.id).stats, pool.get(b.id).stats
    runs = 8 * per_thread
    failures = 8 * len([n for n in range(per_thread) if n % 5 == 0])
    cited = 8 * len([n for n in range(per_thread) if n % 2 == 0])
    assert (sa.retrieved, sa.retrieved_failure, sa.retrieved_success) == (runs, failures, runs - failures)
    assert sa.cited == cited and sb.cited == 0 and sb.retrieved == runs
    assert len(pool.history(a.id)) == runs


def test_a_stale_rewrite_of_a_memory_keeps_the_credit_another_writer_added(pool):
    memory = insight(*CODING[0])
    pool.add(memory)
    stale = pool.get(memory.id)  # read by one writer...
    pool.credit("other-process-run", [Use(memory.id, True)], "success", "tests")  # ...another credits...
    pool.store.set_payload(memory.id, payload_of(stale.model_copy(update={"archived": ""})))  # ...rewrite
    assert pool.get(memory.id).stats.cited_success == 1


def test_an_unknown_id_is_reported_and_a_hostile_record_is_ignored(pool):
    memory = insight(*CODING[0])
    pool.add(memory)
    report = pool.credit("r1", [Use("no-such-id", True), Use(memory.id, True)], "success", "tests")
    assert report.missing == ["no-such-id"] and report.credited == {memory.id: True}
    garbage = {"r2": "not an entry", "r3": {"c": 7, "o": "s", "t": "2026-01-01T00:00:00"}, "r4": {"c": 1},
               "r5": {"c": 1, "o": "x", "v": "tests", "t": "yesterday"}}
    pool.store.set_payload(memory.id, garbage, key=CREDIT_KEY)
    stats = pool.get(memory.id).stats
    assert (stats.retrieved, stats.cited_success) == (1, 1)
    assert [row["run_id"] for row in pool.history(memory.id)] == ["r1"]


def test_settings_out_of_range_are_one_clear_error():
    for bad in ({"quarantine_min_cited": 0}, {"quarantine_confidence": 1.5}, {"relevance_floor": 2},
                {"candidates": 0}, {"no_such": 1}):
        with pytest.raises(ValidationError) as err:
            LifecycleConfig(**bad)
        assert err.value.error_count() == 1


def test_a_harmful_memory_is_quarantined_and_its_neighbour_is_not(coding_pool):
    cfg = LifecycleConfig()
    hits = coding_pool.retrieve("Fix the failing unit test and submit", k=3, lifecycle=cfg).hits
    harmful, helpful = hits[0].memory, hits[1].memory
    runs = run_ids()
    for n in range(12):  # the pool's runs mostly succeed when the harmful memory is not followed
        coding_pool.credit(next(runs), [Use(helpful.id, True)], "success" if n % 4 else "failure", "tests",
                           lifecycle=cfg)
    quarantined_after = None
    for n in range(1, 10):
        report = coding_pool.credit(next(runs), [Use(harmful.id, True), Use(helpful.id, False)], "failure",
                                    "tests", lifecycle=cfg)
        if report.quarantined:
            quarantined_after = n
            break
    assert quarantined_after == cfg.quarantine_min_cited
    stored = coding_pool.get(harmful.id)
    assert stored.status == "quarantined" and "cited in 5 judged runs, 0 succeeded" in stored.quarantined[0]
    assert coding_pool.get(helpful.id).status == "active"
    base = coding_pool.base_rate().rate
    assert utility(coding_pool.get(helpful.id).stats, base, cfg) > utility(stored.stats, base, cfg)
    again = coding_pool.retrieve("Fix the failing unit test and submit", k=3, lifecycle=cfg)
    assert harmful.id not in ids_of(again.hits) and helpful.id in ids_of(again.hits)
    assert harmful.id in ids_of(coding_pool.search("Fix the failing unit test and submit", k=3))  # off: research
    assert coding_pool.stats()["status"]["quarantined"] == 1


def test_a_few_failures_or_failures_at_the_base_rate_do_not_quarantine(coding_pool):
    cfg = LifecycleConfig()
    memory = next(iter(coding_pool))
    runs = run_ids()
    for n in range(4):  # under the minimum evidence
        assert not coding_pool.credit(next(runs), [Use(memory.id, True)], "failure", "tests", lifecycle=cfg).quarantined
    other = [m for m in coding_pool if m.id != memory.id][0]
    for n in range(40):  # a hard pool: its runs fail 3 times in 4, and so do this memory's
        coding_pool.credit(next(runs), [Use(other.id, n % 4 == 0)], "success" if n % 4 == 0 else "failure", "tests")
    assert coding_pool.get(memory.id).status == "active"
    assert wilson_upper(0, 5, 0.9) < 0.3 < wilson_upper(2, 5, 0.9)


def test_release_serves_it_again_and_only_new_evidence_counts(coding_pool):
    cfg = LifecycleConfig(quarantine_min_cited=3)
    memory = next(iter(coding_pool))
    runs = run_ids()
    for _ in range(3):
        coding_pool.credit(next(runs), [Use(memory.id, True)], "failure", "tests", lifecycle=cfg)
    assert coding_pool.get(memory.id).status == "quarantined"
    released = coding_pool.release(memory.id)
    assert released.status == "active" and released.quarantine_released and released.quarantine_baseline
    for _ in range(2):  # two more failures: with the three before the release they would be five
        assert not coding_pool.credit(next(runs), [Use(memory.id, True)], "failure", "tests", lifecycle=cfg).quarantined
    assert coding_pool.credit(next(runs), [Use(memory.id, True)], "failure", "tests", lifecycle=cfg).quarantined


def test_descendants_follow_into_quarantine_unless_their_record_clears_them(coding_pool):
    cfg = LifecycleConfig(quarantine_min_cited=3)
    parent = next(iter(coding_pool))
    child = InsightMemory(title="Skip the slow tests", description="Only run the fast tests before submitting.",
                          content="x", sources=[Provenance(domain="d", source_task_id="c1", cited=[parent.id])])
    grandchild = InsightMemory(title="Submit early", description="Submit as soon as the code compiles.",
                               content="y", sources=[Provenance(domain="d", source_task_id="c2", cited=[child.id])])
    proven = InsightMemory(title="Run the fast tests first", description="Run quick tests, then the full suite.",
                           content="z", sources=[Provenance(domain="d", source_task_id="c3", cited=[parent.id])])
    coding_pool.add_many([child, grandchild, proven])
    runs = run_ids()
    for _ in range(4):
        coding_pool.credit(next(runs), [Use(proven.id, True)], "success", "tests")
    for _ in range(3):
        report = coding_pool.credit(next(runs), [Use(parent.id, True)], "failure", "tests", lifecycle=cfg)
    assert set(report.quarantined) == {parent.id, child.id, grandchild.id}
    assert coding_pool.get(grandchild.id).quarantined[0].startswith(f"descendant of {child.id}")
    assert coding_pool.get(proven.id).status == "active"
    coding_pool.release(parent.id)
    assert {coding_pool.get(i).status for i in (parent.id, child.id, grandchild.id)} == {"active"}


def test_the_floor_leaves_an_unrelated_task_without_memories(coding_pool):
    cfg = LifecycleConfig()
    unrelated = coding_pool.retrieve("Bake a sourdough loaf and decorate the cake for the party", k=3, lifecycle=cfg)
    assert unrelated.hits == [] and unrelated.floor_source.startswith("calibrated")
    assert all(c.why_not.startswith("below the relevance floor") for c in unrelated.candidates)
    related = coding_pool.retrieve("The unit tests fail after my edit; fix the bug", k=3, lifecycle=cfg)
    assert len(related.hits) == 3 and related.floor == unrelated.floor
    assert coding_pool.retrieve("Bake a sourdough loaf", k=3, lifecycle=LifecycleConfig(relevance_floor=-1)).hits


def test_a_small_pool_uses_the_default_floor(pool):
    pool.add_many([insight(*CODING[0])])
    found = pool.retrieve("rerun the unit tests before submitting", k=3, lifecycle=LifecycleConfig())
    assert found.floor == 0.15 and found.floor_source.startswith("default") and len(found.hits) == 1


def test_lifecycle_off_is_exactly_the_research_search(coding_pool):
    for query in ("Fix the failing unit test", "Bake bread", "Rust integer overflow in a sum"):
        off = coding_pool.retrieve(query, k=3)
        plain = coding_pool.search(query, k=3)
        assert [(h.memory.id, h.score, h.similarity) for h in off.hits] == \
            [(h.memory.id, h.score, h.similarity) for h in plain]


def test_without_evidence_the_lifecycle_keeps_the_ranker_order(coding_pool):
    query = "Fix the failing unit test and submit"
    on = coding_pool.retrieve(query, k=3, lifecycle=LifecycleConfig(relevance_floor=-1))
    assert ids_of(on.hits) == ids_of(coding_pool.search(query, k=3))
    assert [c.rank_before for c in on.candidates if c.injected] == [0, 1, 2]


def test_utility_moves_a_proven_memory_up_deterministically(coding_pool):
    cfg = LifecycleConfig(relevance_floor=-1)
    query = "Fix the failing unit test and submit"
    before = coding_pool.retrieve(query, k=3, lifecycle=cfg)
    fifth = next(c for c in before.candidates if c.rank_before == 4)
    runs = run_ids()
    for _ in range(8):
        coding_pool.credit(next(runs), [Use(fifth.id, True)], "success", "tests")
    for _ in range(8):
        coding_pool.credit(next(runs), [Use(before.hits[2].memory.id, True)], "failure", "tests")
    after = coding_pool.retrieve(query, k=3, lifecycle=cfg)
    assert fifth.id in ids_of(after.hits) and before.hits[2].memory.id not in ids_of(after.hits)
    assert ids_of(coding_pool.retrieve(query, k=3, lifecycle=cfg).hits) == ids_of(after.hits)
    moved = next(c for c in after.candidates if c.id == fifth.id)
    assert moved.rank_before == 4 and moved.rank_after < 3 and moved.utility > after.base_rate


def test_a_memory_shown_often_and_never_cited_decays(coding_pool):
    cfg = LifecycleConfig(relevance_floor=-1, min_evidence=1000, decay_weight=0.5)  # decay alone
    query = "Fix the failing unit test and submit"
    top = coding_pool.retrieve(query, k=1, lifecycle=cfg).hits[0].memory
    runs = run_ids()
    for _ in range(40):
        coding_pool.credit(next(runs), [Use(top.id, False)], "success", "tests")
    found = coding_pool.retrieve(query, k=3, lifecycle=cfg)
    decayed = next(c for c in found.candidates if c.id == top.id)
    assert decayed.decay == pytest.approx(0.5 * 40 / 50) and decayed.rank_after > 0
    coding_pool.credit(next(runs), [Use(top.id, True)], "success", "tests")  # cited again: the decay is gone
    assert coding_pool.retrieve(query, k=1, lifecycle=cfg).hits[0].memory.id == top.id


def test_a_merge_keeps_the_credit_of_the_memory_it_absorbs(pool):
    small, large = sorted([insight("Rerun the tests", "Rerun them.", task="a"),
                           insight("Rerun the tests", "Rerun them.", task="b")], key=lambda m: m.id)
    pool.add(large)
    pool.credit("r1", [Use(large.id, True)], "success", "tests")
    pool.add(small)
    kept = pool.get(large.id)
    assert (kept.stats.cited_success, kept.stats.retrieved) == (1, 1) and pool.count() == 1


def test_a_credit_map_that_is_not_a_map_is_replaced_not_a_crash(pool):
    memory = insight(*CODING[0])
    pool.add(memory)
    pool.store.set_payload(memory.id, {CREDIT_KEY: "garbage"})
    assert pool.get(memory.id).stats.retrieved == 0
    pool.credit("r1", [Use(memory.id, True)], "success", "tests")
    assert pool.get(memory.id).stats.cited_success == 1
