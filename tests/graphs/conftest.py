import pytest


@pytest.fixture(scope="session")
def studio_server(tmp_path_factory):
    """One `langgraph dev` serving our graphs (helpers/studio.py) for every Studio test that asks: (client, its dir)."""
    from helpers.studio import langgraph_dev

    with langgraph_dev(tmp_path_factory.mktemp("studio")) as served:
        yield served


@pytest.fixture
def server(studio_server):
    """The session's server, shared by the Studio modules that use this fixture."""
    return studio_server
