"""The pool, lifecycle, dedup, consolidation and store tests against a Qdrant server (`make test-server`).

Without QDRANT_URL every test here is skipped with the reason. With it, the cases of the embedded-pool modules
that take a pool run again here, each in a namespace of its own on the server's one collection (tenancy is what
keeps them apart), and the namespace is emptied afterwards. The cases are taken from those modules by their
fixtures, not listed by hand: a new pool test there runs against the server too."""

from __future__ import annotations

import inspect
import os
import uuid

import pytest

from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.engine.storage import ClientStore, Conditions, StoredPoint
from helpers.cases import load_cases

test_consolidate, test_dedup, test_lifecycle, test_pool, test_retrieval_fusion = map(load_cases, [
    "test_consolidate", "test_dedup", "test_lifecycle", "test_pool", "test_retrieval_fusion"])

SERVER = os.environ.get("QDRANT_URL")
NO_SERVER = "no Qdrant server: set QDRANT_URL (docker compose up -d; make test-server)"
POOL_FIXTURES = {"pool", "coding_pool", "seeded"}
ALLOWED = POOL_FIXTURES | {"tmp_path", "embeddings", "monkeypatch"}


def server_pool(embeddings, monkeypatch, seed=()):
    """A namespace of its own, also the CLI's in this test (MTL_NAMESPACE): a case invoking `mtl` sees it."""
    if not SERVER:
        pytest.skip(NO_SERVER)
    monkeypatch.setenv("MTL_NAMESPACE", f"test-{uuid.uuid4().hex[:12]}")
    pool = MemoryPool.open(SERVER, embeddings)
    if seed:
        pool.add_many(seed)
    return pool


def emptied(pool: MemoryPool) -> None:
    pool.store.delete([h.id for h in pool.store.scroll()])  # every point, a test's unreadable one included
    pool.close()


@pytest.fixture
def pool(embeddings, monkeypatch):
    """An empty namespace of its own on the server (the embedded modules' `pool`, server-side)."""
    opened = server_pool(embeddings, monkeypatch)
    yield opened
    emptied(opened)


@pytest.fixture
def coding_pool(embeddings, monkeypatch):
    """test_lifecycle's seeded pool, server-side."""
    opened = server_pool(embeddings, monkeypatch, [test_lifecycle.insight(t, d, task=f"t{i}")
                                      for i, (t, d) in enumerate(test_lifecycle.CODING)])
    yield opened
    emptied(opened)


seeded = test_consolidate.seeded  # its seeding, on this module's server `pool`


def _server_cases() -> dict[str, object]:
    """Every case of the embedded modules that takes a pool fixture and nothing an embedded engine alone has."""
    cases = {}
    for module in (test_pool, test_lifecycle, test_dedup, test_consolidate, test_retrieval_fusion):
        for name, fn in vars(module).items():
            if not (name.startswith("test_") and inspect.isfunction(fn)):
                continue
            params = set(inspect.signature(fn).parameters)
            if params & POOL_FIXTURES and params <= ALLOWED:
                cases[f"{name}_{module.__name__.removeprefix('test_')}"] = fn
    return cases


globals().update(_server_cases())


def test_server_cases_were_found():
    assert len(_server_cases()) >= 20  # the embedded modules' pool cases, not a hand list


@pytest.fixture
def store():
    if not SERVER:
        pytest.skip(NO_SERVER)
    from qdrant_client import QdrantClient

    client = QdrantClient(url=SERVER, api_key=os.environ.get("QDRANT_API_KEY"), timeout=10,
                          check_compatibility=False)
    collection = f"mtl_store_test_{uuid.uuid4().hex[:8]}"
    yield ClientStore(client, collection, 4)
    client.delete_collection(collection)
    client.close()


def test_server_store_filters_namespaces_and_counts_them(store):
    def point(n: int, **payload) -> StoredPoint:
        return StoredPoint(str(uuid.UUID(int=n)), [1.0, float(n), 0.0, 0.0], ([n], [1.0]), {"type": "insight",
                                                                                           **payload})
    store.upsert([point(1), point(2, namespace="a"), point(3, namespace="b"), point(4, namespace="default")])
    ids = lambda where: sorted(int(uuid.UUID(h.id)) for h in store.scroll(where=where))  # noqa: E731
    assert ids(Conditions(namespace="default")) == [1, 4]  # no namespace at all reads as the default one
    assert ids(Conditions(namespace="a")) == [2] and store.count(Conditions(namespace="b")) == 1
    assert store.namespaces() == {"a": 1, "b": 1, "default": 1}
    schema = store.client.get_collection(store.collection).payload_schema
    assert schema["namespace"].params.is_tenant  # the server keeps each tenant's points together
