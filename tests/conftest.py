import os

import pytest

# Tests never reach a hub or a tracing service.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")


@pytest.fixture(scope="session", autouse=True)
def _no_workspace_mount_left(tmp_path_factory):
    """A test that kills a sandbox's owner leaves its workspace's quota filesystem mounted: unmount those at the end."""
    yield
    from mtl_graph.sandbox.mounts import discard_under

    discard_under(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def embeddings():
    from mtl_graph.memory.engine.embeddings import local_embeddings

    return local_embeddings()


@pytest.fixture
def pool(embeddings, tmp_path):
    """An empty pool in the test's directory (a test module may define its own, seeded, `pool`)."""
    from mtl_graph.memory.pool.pool import MemoryPool

    with MemoryPool.open(tmp_path / "pool", embeddings) as p:
        yield p


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch, tmp_path):
    """Each test gets its own default pool and run log, whatever the developer's environment says."""
    for name in list(os.environ):
        if name.startswith("MTL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MTL_POOL", str(tmp_path / "default-pool"))
    monkeypatch.setenv("MTL_RUN_LOG", str(tmp_path / "runs.jsonl"))
