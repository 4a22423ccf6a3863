"""MemoryPool on both embedded engines, with the real local embedding model."""

import json
import os
import subprocess
import sys

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from mtl_graph.memory.engine.embeddings import EmbeddingError
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.summary import SummaryMemory
from mtl_graph.memory.formats.workflow import WorkflowMemory
from mtl_graph.memory.pool.pool import EmbeddingMismatchError, MemoryPool, PoolError

ENGINES = ["edge", "client"]


def insight(title, description, content=None, domain="d1", task="t1", outcome="success"):
    return InsightMemory(title=title, description=description, content=content or description, outcome=outcome,
                         sources=[Provenance(domain=domain, source_task_id=task, task_model="m")])


TESTING = insight("Verify changes with the test suite", "Run the unit tests after every edit before submitting.")
UNRELATED = insight("Prefer descriptive variable names", "Readable names make code reviews faster.",
                    domain="d2", task="t2")
DATES = insight("Use timezone-aware datetimes", "Naive datetimes break across daylight-saving changes.",
                domain="d3", task="t3", outcome="failure")


@pytest.fixture(params=ENGINES)
def pool(request, embeddings):
    p = MemoryPool.open(":memory:", embeddings, engine=request.param)
    yield p
    p.close()


def test_testing_query_ranks_testing_insight_first(pool):
    pool.add_many([UNRELATED, DATES, TESTING])
    hits = pool.search("How should I check that my fix actually works?", k=3)
    assert hits[0].memory.id == TESTING.id
    assert hits[0].similarity > hits[-1].similarity


def test_filters_and_exclusions(pool):
    workflow = WorkflowMemory(goal="Verify a code change by running the tests", actions=["run pytest -q"],
                              sources=[Provenance(domain="d1", source_task_id="t9")])
    pool.add_many([TESTING, UNRELATED, DATES, workflow])
    assert {h.memory.type for h in pool.search("run the tests", type="workflow", k=5)} == {"workflow"}
    assert all(h.memory.type == "insight" for h in pool.search("run the tests", type="insight", k=5))
    assert [h.memory.id for h in pool.search("dates", outcome="failure", k=5)] == [DATES.id]
    kept = pool.search("run the tests", k=10, exclude_domains=["d1"])
    assert kept and all("d1" not in h.memory.domains for h in kept)
    kept = pool.search("run the tests", k=10, exclude_task_ids=["t1", "t9"])
    assert {h.memory.id for h in kept} == {UNRELATED.id, DATES.id}
    assert pool.search("run the tests", k=0) == []
    with pytest.raises(ValueError):
        pool.search("   ")
    with pytest.raises(ValueError):
        pool.search("x", type="poem")


SIGN_IN = [
    "Authentication problems appear when users cannot sign in because their credentials expired.",
    "Sign-in errors for accounts often come from a wrong password hash comparison.",
    "When a user cannot sign in, record the reason without writing secrets to logs.",
    "Account lockout after repeated unsuccessful sign-in attempts must be tested with several users.",
    "Users unable to sign in may have an unverified email address.",
    "Single sign-on problems usually come from a clock skew between servers.",
    "Users who cannot authenticate after a password reset may have a cached session.",
    "Two-factor authentication codes expire quickly; users must enter them at once.",
]


def test_hybrid_finds_exact_identifier_that_dense_misses(pool):
    target = insight("Numeric parsing", "The parser in check_id_42 expected an int but got a string.")
    pool.add_many([insight(f"Sign-in trouble {i}", t) for i, t in enumerate(SIGN_IN)] + [target])
    query = "cannot sign in: error in check_id_42"
    dense_only = [h.memory.id for h in pool.search(query, k=3, retriever="dense")]
    assert target.id not in dense_only
    hybrid = {h.memory.id: h for h in pool.search(query, k=3)}
    assert target.id in hybrid
    assert hybrid[target.id].retriever in {"bm25", "both"}


def test_near_duplicates_merge_provenance(pool):
    first = pool.add(TESTING)
    assert first.status == "added"
    again = pool.add(TESTING)
    assert again.status == "identical" and again.merged_into == TESTING.id
    # the same text up to case and spacing, from another run: one memory, two sources
    twin = insight("verify changes with  the test suite", "Run the unit tests after every edit before submitting.",
                   domain="d7", task="t7")
    result = pool.add(twin)
    assert result.status == "merged" and result.merged_into == min(TESTING.id, twin.id)
    assert pool.count() == 1
    stored = pool.get(result.merged_into)
    assert {s.domain for s in stored.sources} == {"d1", "d7"}
    # one word of difference is another memory; so is the same text under another type
    other = insight("Verify changes with the test suite", "Run the unit tests after each edit before submitting.")
    assert pool.add(other).status == "added"
    summary = SummaryMemory(task_summary=TESTING.key_text(), experience_summary="Ran tests.")
    assert pool.add(summary).status == "added"
    # duplicates inside one batch
    results = pool.add_many([DATES, insight(DATES.title.upper(), DATES.description, domain="d8", task="t8",
                                            outcome="failure")])
    assert sorted(r.status for r in results) == ["added", "merged"]
    assert pool.count() == 4


def test_stats_update_and_delete(pool):
    pool.add_many([TESTING, UNRELATED, DATES])
    pool.update_stats([TESTING.id], "success")
    pool.update_stats([TESTING.id, DATES.id], "failure")
    stats = pool.get(TESTING.id).stats
    assert (stats.retrieved, stats.retrieved_success, stats.retrieved_failure) == (2, 1, 1)
    assert pool.stats()["type"] == {"insight": 3}
    assert pool.stats()["outcome"] == {"success": 2, "failure": 1}
    assert pool.delete(UNRELATED.id) is True
    assert pool.delete(UNRELATED.id) is False
    assert pool.get(UNRELATED.id) is None and len(pool) == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_persistence_and_export_import_round_trip(tmp_path, embeddings, engine):
    location = tmp_path / "pool"
    with MemoryPool.open(location, embeddings, engine=engine) as pool:
        pool.add_many([TESTING, UNRELATED, DATES])
        pool.update_stats([DATES.id], "success")
    with MemoryPool.open(location, embeddings) as pool:
        assert pool.engine == engine and pool.count() == 3
        assert pool.get(DATES.id).stats.retrieved == 1
        exported = tmp_path / "memories.jsonl"
        assert pool.export(exported) == 3
    with MemoryPool.open(tmp_path / "copy", embeddings, engine=engine) as copy:
        report = copy.import_jsonl(exported)
        assert not report.errors and [r.status for r in report.results] == ["added"] * 3
        originals = {json.loads(line)["id"]: json.loads(line) for line in exported.read_text().splitlines()}
        for memory in copy:
            assert memory.model_dump(mode="json") == originals[memory.id]


def test_same_directory_in_one_process_is_one_pool(tmp_path, embeddings):
    a = MemoryPool.open(tmp_path / "p", embeddings)
    b = MemoryPool.open(str(tmp_path / "p" / ".." / "p"), embeddings)
    assert a is b
    a.add(TESTING)
    b.close()
    assert a.count() == 1  # still open: one handle left
    a.close()


def test_other_process_gets_a_clear_lock_error(tmp_path, embeddings):
    with MemoryPool.open(tmp_path / "p", embeddings):
        code = (
            "import sys\nfrom mtl_graph.memory.pool.pool import MemoryPool, PoolLockedError\n"
            f"try:\n    MemoryPool.open({str(tmp_path / 'p')!r})\nexcept PoolLockedError as e:\n"
            "    print(e); sys.exit(3)\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, proc.stderr
        assert "another process" in proc.stdout and "server" in proc.stdout
        assert f"(pid {os.getpid()}: " in proc.stdout  # the holder, named from the lock file it wrote


def test_mismatched_embedder_is_refused(tmp_path, embeddings):
    with MemoryPool.open(tmp_path / "p", embeddings) as pool:
        pool.add(TESTING)
    with pytest.raises(EmbeddingMismatchError, match="built with embeddings"):
        MemoryPool.open(tmp_path / "p", DeterministicFakeEmbedding(size=384))
    with MemoryPool.open(tmp_path / "p", embeddings) as pool:
        with pytest.raises(EmbeddingMismatchError):
            MemoryPool.open(tmp_path / "p", DeterministicFakeEmbedding(size=8))


class ShrinkingEmbeddings(DeterministicFakeEmbedding):
    """Right size for the probe, wrong size afterwards."""

    def embed_documents(self, texts):
        return [v[:5] for v in super().embed_documents(texts)]


def test_wrong_vector_size_is_a_clear_error():
    with MemoryPool.open(":memory:", ShrinkingEmbeddings(size=16)) as pool:
        with pytest.raises(EmbeddingError, match="size 5; the pool expects 16"):
            pool.add(TESTING)


def test_unreachable_server_and_corrupt_meta(tmp_path, embeddings):
    with pytest.raises(PoolError, match="cannot reach the Qdrant server"):
        MemoryPool.open("http://127.0.0.1:9", embeddings)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "pool.json").write_text("{not json")
    with pytest.raises(PoolError, match="corrupt"):
        MemoryPool.open(tmp_path / "bad", embeddings)
    (tmp_path / "file").write_text("x")
    with pytest.raises(PoolError, match="not a directory"):
        MemoryPool.open(tmp_path / "file", embeddings)


def test_import_reports_bad_lines_and_keeps_good_ones(tmp_path, pool):
    path = tmp_path / "in.jsonl"
    good = [TESTING.model_dump_json(), UNRELATED.model_dump_json()]
    path.write_text("\n".join([
        good[0], "{broken", json.dumps({"type": "poem", "text": "x"}),
        json.dumps({"type": "insight", "title": "", "description": "d", "content": "c"}), good[1],
    ]) + "\n")
    report = pool.import_jsonl(path)
    assert [r.status for r in report.results] == ["added", "added"]
    assert len(report.errors) == 3
    assert report.errors[0].startswith(f"{path}:2: malformed JSON")
    assert f"{path}:3: invalid memory" in report.errors[1]
    assert f"{path}:4: invalid memory (insight.title" in report.errors[2]
    with pytest.raises(PoolError, match="cannot read"):
        pool.import_jsonl(tmp_path / "missing.jsonl")


def test_search_can_be_restricted_to_a_subset(pool):
    pool.add_many([TESTING, UNRELATED, DATES])
    hits = pool.search("run the tests", k=3, only_ids=[UNRELATED.id, DATES.id])
    assert {h.memory.id for h in hits} == {UNRELATED.id, DATES.id}
    assert pool.search("run the tests", k=3, only_ids=[]) == []


def test_import_survives_non_utf8_lines_and_directories(tmp_path, pool):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\xff\xfe not text\n" + TESTING.model_dump_json().encode() + b"\n")
    report = pool.import_jsonl(path)
    assert report.errors == [f"{path}:1: not UTF-8 text"] and [r.status for r in report.results] == ["added"]
    with pytest.raises(PoolError, match="cannot read"):
        pool.import_jsonl(tmp_path)


def test_a_corrupt_point_in_the_pool_is_a_clear_error(pool):
    from mtl_graph.memory.engine.storage import StoredPoint

    pool.add(TESTING)
    vector = pool.embed(["Verify changes with the test suite"])[0]
    pool.store.upsert([StoredPoint("00000000-0000-0000-0000-000000000001", vector, ([1], [1.0]),
                                   {"memory": {"type": "insight", "title": ""}, "type": "insight"})])
    with pytest.raises(PoolError, match="point 00000000-0000-0000-0000-000000000001 .* not a valid memory"):
        pool.search("Verify changes with the test suite", k=2)
    with pytest.raises(PoolError, match="not a valid memory"):
        list(pool)
    assert pool.get(TESTING.id).content_fields() == TESTING.content_fields()  # the other points still read fine
