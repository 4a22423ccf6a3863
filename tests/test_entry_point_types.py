"""Every public entry point checks the kind of what it is given: a pool, store or graph factory handed the wrong
kind of object raises a one-line TypeError (an empty location a ValueError) and creates no file. Before, a pool
object, a number, None or bytes given as a location became a directory named after its repr."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langgraph.graph import StateGraph

from helpers.paths import EXAMPLES
from mtl_graph import (MemoryPool, MemoryTransferMiddleware, PoolStore, ScriptedChatModel, build_mtl_graph,
                       with_memory_transfer)

WRONG_KINDS = [3, 2.5, True, None, b"pool", bytearray(b"pool"), ["pool"], {"path": "pool"}, ("pool",), object(),
               lambda: "pool"]
"""Values of every other kind a caller might pass by mistake (and bytes: a path here is text)."""


def _ids(values):
    return [type(v).__name__ for v in values]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory: nothing may appear in it."""
    where = tmp_path / "cwd"
    where.mkdir()
    monkeypatch.chdir(where)
    return where


def _one_line_type_error(call, *words: str) -> str:
    with pytest.raises(TypeError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message
    return message


@pytest.mark.parametrize("location", WRONG_KINDS, ids=_ids(WRONG_KINDS))
def test_a_pool_location_of_the_wrong_kind_is_refused_before_any_file(workdir: Path, location) -> None:
    _one_line_type_error(lambda: MemoryPool.open(location), "MemoryPool.open", type(location).__name__)
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize("location", ["", "   ", "\t\n"])
def test_an_empty_location_is_not_the_working_directory(workdir: Path, location: str) -> None:
    with pytest.raises(ValueError, match="location is empty"):
        MemoryPool.open(location)
    with pytest.raises(ValueError, match="location is empty"):
        PoolStore.open(location)
    assert list(workdir.iterdir()) == []


def test_an_open_pool_given_as_a_location_says_so(workdir: Path, pool: MemoryPool) -> None:
    message = _one_line_type_error(lambda: MemoryPool.open(pool), "MemoryPool", "already open")
    assert "object at 0x" not in message
    _one_line_type_error(lambda: PoolStore.open(pool), "PoolStore.open", "already open")
    assert list(workdir.iterdir()) == []


def test_path_like_locations_still_open(workdir: Path, embeddings) -> None:
    class Where(os.PathLike):
        def __fspath__(self) -> str:
            return str(workdir / "by-fspath")

    for location in (workdir / "by-path", Where()):
        with MemoryPool.open(location, embeddings=embeddings) as opened:
            assert Path(opened.location).name in {"by-path", "by-fspath"}
    assert sorted(p.name for p in workdir.iterdir()) == ["by-fspath", "by-path"]


@pytest.mark.parametrize("embeddings", [3, b"local", ["local"], object()], ids=_ids([3, b"", [], object()]))
def test_embeddings_of_the_wrong_kind(workdir: Path, embeddings) -> None:
    _one_line_type_error(lambda: MemoryPool.open(":memory:", embeddings=embeddings), "embeddings",
                         type(embeddings).__name__)


@pytest.mark.parametrize("given", [v for v in WRONG_KINDS if v is not None], ids=_ids([v for v in WRONG_KINDS
                                                                                     if v is not None]))
def test_a_store_given_the_wrong_kind_of_pool(workdir: Path, given) -> None:
    _one_line_type_error(lambda: PoolStore.open(":memory:", pool=given), "pool=", type(given).__name__)
    _one_line_type_error(lambda: PoolStore.open(given), "PoolStore.open", type(given).__name__)
    assert list(workdir.iterdir()) == []


def _wrapped():
    inner = StateGraph(dict)
    inner.add_node("noop", lambda s: {})
    inner.set_entry_point("noop")
    return inner.compile()


FACTORIES = {
    "build_mtl_graph": lambda pool, model: build_mtl_graph(model, pool, memory_type="none"),
    "with_memory_transfer": lambda pool, model: with_memory_transfer(_wrapped(), pool, model=model,
                                                                     memory_type="none"),
    "MemoryTransferMiddleware": lambda pool, model: MemoryTransferMiddleware(pool, model=model, memory_type="none"),
}


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("pool", [v for v in WRONG_KINDS if v is not None] + ["pool-dir", Path("pool-dir")],
                         ids=_ids([v for v in WRONG_KINDS if v is not None]) + ["str", "Path"])
def test_a_graph_factory_given_the_wrong_kind_of_pool(workdir: Path, factory: str, pool) -> None:
    message = _one_line_type_error(lambda: FACTORIES[factory](pool, ScriptedChatModel()), "pool", "MemoryPool",
                                   type(pool).__name__)
    if isinstance(pool, (str, Path)):
        assert "MemoryPool.open(" in message  # a location: the hint says how to open it
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("model", [3, b"openai:x", ["openai:x"], {"model": "x"}, object()],
                         ids=_ids([3, b"", [], {}, object()]))
def test_a_graph_factory_given_the_wrong_kind_of_model(workdir: Path, factory: str, model) -> None:
    _one_line_type_error(lambda: FACTORIES[factory](None, model), "model", type(model).__name__)


@pytest.mark.parametrize("factory", FACTORIES)
def test_the_right_kinds_still_build(factory: str, pool: MemoryPool) -> None:
    for model in (None, f"scripted:{EXAMPLES / 'primes' / 'demo_script.json'}", ScriptedChatModel()):
        for given in (None, pool, pool.in_namespace("team-a")):
            assert FACTORIES[factory](given, model) is not None
