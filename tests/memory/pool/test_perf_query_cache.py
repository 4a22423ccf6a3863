"""The query-vector cache: hits skip the model, and a different embeddings object never sees another's vectors."""

import threading

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.pool.query_cache import QueryCacheConfig, QueryVectorCache


class CountingEmbeddings(DeterministicFakeEmbedding):
    """langchain's deterministic embeddings, counting the queries it embeds (and failing on demand)."""

    calls: list = []
    fail: bool = False
    sign: float = 1.0
    """-1 makes a different model: every vector mirrored."""

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(text)
        if self.fail:
            raise RuntimeError("model server down")
        return [self.sign * x for x in super().embed_query(text)]


def counting(size: int = 16) -> CountingEmbeddings:
    return CountingEmbeddings(size=size, calls=[])


def test_a_cached_query_is_embedded_once():
    cache, emb = QueryVectorCache(), counting()
    first = cache.vector(emb, "fix the flaky test")
    assert cache.vector(emb, "fix the flaky test") == first
    assert emb.calls == ["fix the flaky test"]
    assert (cache.hits, cache.misses) == (1, 1)


def test_another_embeddings_object_invalidates_every_vector():
    cache, old, new = QueryVectorCache(), counting(), CountingEmbeddings(size=16, calls=[], sign=-1)
    old_vector = cache.vector(old, "quote shell variables")
    new_vector = cache.vector(new, "quote shell variables")
    assert new.calls == ["quote shell variables"]  # not served from the old model's entry
    assert new_vector == new.embed_query("quote shell variables") and new_vector != old_vector
    assert len(cache) == 1
    cache.vector(old, "quote shell variables")  # switching back recomputes too
    assert old.calls == ["quote shell variables"] * 2


def test_an_equal_but_distinct_embeddings_object_is_not_trusted():
    cache, a, b = QueryVectorCache(), counting(), counting()  # same config, different objects
    cache.vector(a, "q")
    cache.vector(b, "q")
    assert a.calls == ["q"] and b.calls == ["q"]


def test_least_recently_used_vectors_are_dropped_first():
    cache, emb = QueryVectorCache(QueryCacheConfig(max_entries=2)), counting()
    for text in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" arrives
        cache.vector(emb, text)
    emb.calls.clear()
    cache.vector(emb, "a")
    cache.vector(emb, "c")
    assert emb.calls == []
    cache.vector(emb, "b")
    assert emb.calls == ["b"]


def test_a_zero_size_cache_always_asks_the_model():
    cache, emb = QueryVectorCache(QueryCacheConfig(max_entries=0)), counting()
    cache.vector(emb, "x")
    cache.vector(emb, "x")
    assert emb.calls == ["x", "x"] and len(cache) == 0


def test_a_returned_vector_cannot_corrupt_the_cache():
    cache, emb = QueryVectorCache(), counting()
    v = cache.vector(emb, "x")
    v[0] = 1e9
    assert cache.vector(emb, "x")[0] != 1e9


def test_a_failed_embedding_is_reported_and_not_cached():
    cache, emb = QueryVectorCache(), counting()
    emb.fail = True
    with pytest.raises(RuntimeError, match="model server down"):
        cache.vector(emb, "the plan")
    assert len(cache) == 0
    emb.fail = False
    assert cache.vector(emb, "the plan") == emb.embed_query("the plan")
    assert (cache.hits, cache.misses) == (0, 2)


def test_concurrent_queries_each_get_their_own_vector():
    cache, emb = QueryVectorCache(QueryCacheConfig(max_entries=8)), counting()
    texts = [f"query {i}" for i in range(32)]
    expected = {t: emb.embed_query(t) for t in texts}
    wrong: list = []

    def ask(offset: int) -> None:
        for n in range(200):
            text = texts[(offset + n) % len(texts)]
            if cache.vector(emb, text) != expected[text]:
                wrong.append(text)

    workers = [threading.Thread(target=ask, args=(i * 5,)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert wrong == [] and len(cache) <= 8
    assert cache.hits + cache.misses == 8 * 200


def test_a_vector_computed_for_a_replaced_model_is_not_stored():
    cache, new = QueryVectorCache(), CountingEmbeddings(size=16, calls=[], sign=-1)
    started, release = threading.Event(), threading.Event()

    class Slow(CountingEmbeddings):
        def embed_query(self, text):
            started.set()
            release.wait(10)
            return super().embed_query(text)

    slow = Slow(size=16, calls=[])
    worker = threading.Thread(target=cache.vector, args=(slow, "q"))
    worker.start()
    assert started.wait(10)
    cache.vector(new, "other")  # the model changes while the slow vector is being computed
    release.set()
    worker.join(10)
    assert slow.calls == ["q"]
    assert cache.vector(new, "q") == new.embed_query("q")  # recomputed, not the old model's late vector
    assert new.calls == ["other", "q", "q"]  # the cache asked the new model for "q" (the check asked once more)


# ----------------------------------------------------------------------------- through the pool
def _memories():
    return [InsightMemory(title=t, description=d, content=d, sources=[Provenance(domain="x")]) for t, d in (
        ("Run the tests after every edit", "Verification catches regressions before submitting."),
        ("Quote shell variables", "Unquoted expansions split file names with spaces."),
        ("Parse CSV with a real parser", "Quoted commas break a naive split on commas."),
    )]


def test_pool_search_gives_the_same_hits_from_the_cache(embeddings):
    with MemoryPool.open(":memory:", embeddings) as pool:
        pool.add_many(_memories())
        cold = pool.search("file names with spaces break my script", k=3)
        warm = pool.search("file names with spaces break my script", k=3)
        assert [(h.memory.id, h.retriever) for h in cold] == [(h.memory.id, h.retriever) for h in warm]
        assert [h.similarity for h in cold] == pytest.approx([h.similarity for h in warm])
        assert pool._query_cache.hits >= 1


def test_pool_search_after_the_embeddings_are_swapped_uses_the_new_model(tmp_path):
    first, second = counting(32), CountingEmbeddings(size=32, calls=[], sign=-1)
    with MemoryPool.open(":memory:", first) as pool:
        pool.add_many(_memories())
        pool.search("csv commas", k=1)
        pool.embeddings = second
        pool.search("csv commas", k=1)
        assert second.calls == ["csv commas"]
        assert pool.query_vector("csv commas") == second.embed_query("csv commas")


def test_a_wrong_sized_query_vector_is_one_clear_error():
    emb = counting(32)
    with MemoryPool.open(":memory:", emb) as pool:
        pool.embeddings = counting(8)
        with pytest.raises(Exception, match="size 8; the pool expects 32"):
            pool.search("anything")
