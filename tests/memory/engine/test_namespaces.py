"""Namespaces: teams sharing one pool never see or change each other's memories (both embedded engines, and a
Qdrant server when QDRANT_URL is set).

The walk is generated: every public method of MemoryPool and every public function of the memory modules that
takes a pool runs in one namespace while another namespace of the same pool holds the same memories and some of
its own; the other namespace's points (ids, vectors, whole payloads) must not change and nothing of its own may
come back. A new method without a recipe here fails `test_every_pool_operation_has_a_recipe`."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.lifecycle import consolidate
from mtl_graph.memory.engine.snapshots import archive as snapshots
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.base import Change, Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.trajectory import TrajectoryMemory, TrajectoryStep
from mtl_graph.memory.engine.namespace import NamespaceError, check_namespace
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.usage import Use
from mtl_graph.memory.engine.storage import NAMESPACE_KEY, Conditions
from helpers.embeddings import Memoised

SERVER = os.environ.get("QDRANT_URL")
ENGINES = ["edge", "client", "server"]
runner = CliRunner()


def insight(title: str, task: str, outcome: str = "success") -> InsightMemory:
    return InsightMemory(title=title, description=f"Applies when {title.lower()}.", content=f"Learned on {task}.",
                         outcome=outcome, sources=[Provenance(run_id=f"run-{task}", source_task_id=task, domain="d")])


def trajectory(task: str, command: str) -> TrajectoryMemory:
    return TrajectoryMemory(task=task, steps=[TrajectoryStep(command=command, observation="ok", exit_code=0)],
                            outcome="success", sources=[Provenance(run_id=f"run-{command}", source_task_id=command)])


SHARED = insight("Run the tests before submitting", "shared")
"""In both namespaces: one content id, two points."""
A_ONLY = insight("Respect the exact output format", "a-task")
B_ONLY = insight("Zebra crossings need a quokka permit", "b-task")
"""Only in the other namespace; its title must never come back from the acting one."""
B_TRAJS = [trajectory("Fix a failing unit test", "pytest -x"), trajectory("Fix one failing unit test", "make test")]
"""Near-duplicates in the other namespace only: a consolidation in the acting one must not find them."""
B_SECRET = "quokka"


@pytest.fixture(scope="module")
def cached(embeddings):
    """The real local model, each text embedded once (the walk adds the same memories many times)."""
    return Memoised(embeddings)


def location_of(engine: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    if engine == "server":
        if not SERVER:
            pytest.skip("no Qdrant server: set QDRANT_URL (docker compose up -d; make test-server)")
        return SERVER, {}
    return str(tmp_path / "pool"), {"engine": engine}


class Audit:
    """Under a pool's NamespacedStore: every filtered call that reaches the engine must name the namespace."""

    def __init__(self, inner: Any, namespace: str) -> None:
        self.inner, self.namespace, self.unscoped = inner, namespace, []

    def _check(self, call: str, where: Any) -> None:
        if where is None or where.namespace != self.namespace:
            self.unscoped.append(call)

    def count(self, where: Conditions | None = None) -> int:
        if where is not None or self.namespace != "default":  # the default namespace's tally is count() - facet
            self._check("count", where)
        return self.inner.count(where)

    def scroll(self, batch: int = 256, where: Any = None, fields: Any = None):
        self._check("scroll", where)
        return self.inner.scroll(batch, where, fields)

    def scroll_points(self, batch: int = 256, where: Any = None):
        self._check("scroll_points", where)
        return self.inner.scroll_points(batch, where)

    def scroll_batches(self, batch: int = 1024, where: Any = None):
        self._check("scroll_batches", where)
        from mtl_graph.memory.engine.storage import point_batches

        return point_batches(self.inner, batch, where)

    def query(self, requests: list) -> list:
        for r in requests:
            self._check("query", r.where)
        return self.inner.query(requests)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


WALKS = [("edge", "team-a"), ("client", "default"), ("server", "team-a")]
"""(engine, acting namespace): a named one (its own point ids and payload key) and the default one (the ids and
payloads of pools written before namespaces) both act beside a named one."""


def seed(location: str, kw: dict[str, Any], cached: Any, acting: str, other: str) -> None:
    with MemoryPool.open(location, cached, namespace=other, **kw) as pool:
        pool.add_many([SHARED, B_ONLY, *B_TRAJS])
        pool.credit("b-run-1", [Use(SHARED.id, True), Use(B_ONLY.id, False)], "failure", "tests")
        pool.credit("b-run-2", [Use(SHARED.id, True)], "failure", "tests")
    with MemoryPool.open(location, cached, namespace=acting, **kw) as pool:
        pool.add_many([SHARED, A_ONLY])


@pytest.fixture(scope="module")
def templates(cached, tmp_path_factory):
    """One seeded directory pool per engine, copied for each walk (seeding is most of a walk's time)."""
    made: dict[str, Path] = {}

    def template(engine: str, acting: str) -> Path:
        if engine not in made:
            made[engine] = tmp_path_factory.mktemp(f"seeded-{engine}") / "pool"
            seed(str(made[engine]), {"engine": engine}, cached, acting, "team-b")
        return made[engine]
    return template


@pytest.fixture(params=WALKS, ids=[f"{e}-{n}" for e, n in WALKS])
def two(request, cached, templates, tmp_path):
    """(acting pool, other pool): two namespaces of one pool, both holding SHARED, the other more."""
    engine, acting = request.param
    location, kw = location_of(engine, tmp_path)
    tag = uuid.uuid4().hex[:8] if engine == "server" else ""  # a server's collection outlives the test
    acting, other_ns = (acting if acting == "default" else acting + tag), "team-b" + tag
    if engine == "server":
        seed(location, kw, cached, acting, other_ns)
    else:
        shutil.copytree(templates(engine, acting), location, symlinks=True)
    mine = MemoryPool.open(location, cached, namespace=acting, **kw)
    other = MemoryPool.open(location, cached, namespace=other_ns, **kw)
    mine.store.inner = Audit(mine.store.inner, mine.namespace)
    yield mine, other
    for pool in (mine, other):
        if engine == "server":
            pool.store.delete([h.id for h in pool.store.scroll()])
        pool.close()


def stored(pool: MemoryPool) -> dict[str, Any]:
    """The pool's points as the engine holds them (raw ids, vectors, payloads), read past every namespace."""
    raw = pool._opened.store
    return {p.id: (np.asarray(p.dense), [list(v) for v in p.sparse], p.payload) for p in raw.scroll_points()
            if p.payload.get(NAMESPACE_KEY, "default") == pool.namespace}


def unchanged(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Same ids, payloads and sparse vectors; dense vectors within 1e-6 (qdrant-client's local mode normalises
    its stored vectors again after a search, which can move the last float32 bit: no write of ours)."""
    return before.keys() == after.keys() and all(
        before[i][1:] == after[i][1:] and np.allclose(before[i][0], after[i][0], rtol=0, atol=1e-6) for i in before)


# ------------------------------------------------------------------ one recipe per operation
def _export(p: MemoryPool, tmp: Path) -> str:
    p.export(tmp / "out.jsonl")
    return (tmp / "out.jsonl").read_text()


def _import(p: MemoryPool, tmp: Path) -> Any:
    (tmp / "in.jsonl").write_text(B_ONLY.model_dump_json() + "\n")
    report = p.import_jsonl(tmp / "in.jsonl")
    assert [r.status for r in report.results] == ["added"]  # the other namespace's copy is not "already present"
    return None


def _restore(p: MemoryPool, tmp: Path) -> Any:
    snapshots.create_snapshot(p, "before", tmp / "snaps")
    p.delete(SHARED.id)
    return snapshots.restore_snapshot(p, "before", tmp / "snaps").count_verified


def _consolidated(p: MemoryPool) -> Any:
    clusters = consolidate.find_clusters(p)
    report = consolidate.apply(p, [consolidate.propose(c) for c in clusters])
    return clusters, report


def _unseen(value: Any) -> Any:
    assert not value, value  # an id of the other namespace is not in this one
    return value


def _history_is_mine(p: MemoryPool) -> Any:
    assert p.history(SHARED.id) == []  # the other namespace's credits on its own copy are not this copy's
    return p.history(B_ONLY.id)


def _base_rate(p: MemoryPool) -> Any:
    rate = p.base_rate()
    assert (rate.success, rate.failure) == (0, 0)  # the other namespace's failed runs are not counted here
    return rate


def _add(p: MemoryPool) -> Any:
    result = p.add(B_ONLY)
    assert result.status == "added"
    return None


def _add_many(p: MemoryPool) -> Any:
    assert [r.status for r in p.add_many([B_ONLY, SHARED])] == ["added", "identical"]
    return None


def _held(p: MemoryPool) -> Any:
    with p.statistics_held():  # writes inside a hold: this namespace's record counts them, no other's
        _add_many(p)
    return _stats_of(p, 3)


def _stats_of(p: MemoryPool, count: int) -> Any:
    stats = p.stats()
    assert sum(stats["type"].values()) == count
    return stats


def _stats(p: MemoryPool) -> Any:
    return _stats_of(p, 2)


def _search(p: MemoryPool) -> Any:
    hits = p.search("zebra crossings quokka permit", k=5)
    assert {h.memory.id for h in hits} <= {SHARED.id, A_ONLY.id}
    return [h.memory for h in hits]


def _prune(p: MemoryPool) -> Any:
    p.credit("a-run", [Use(A_ONLY.id, False)] * 1, "success")
    return consolidate.prune(p, consolidate.stale(p, consolidate.PruneConfig(min_shown=1)))


RECIPES: dict[str, Callable[[MemoryPool, Path], Any]] = {
    "__iter__": lambda p, t: list(p),
    "__len__": lambda p, t: _unseen(len(p) - 2),
    "add": lambda p, t: _add(p),
    "add_many": lambda p, t: _add_many(p),
    "archive": lambda p, t: (_unseen(p.archive(B_ONLY.id, "gone")), p.archive(SHARED.id, "stale")),
    "base_rate": lambda p, t: _base_rate(p),
    "contents_changed": lambda p, t: p.contents_changed(),
    "count": lambda p, t: _unseen(p.count() - 2) or _unseen(p.count("trajectory")),
    "credit": lambda p, t: p.credit("a-run", [Use(SHARED.id, True), Use(B_ONLY.id, False)], "success",
                                    lifecycle=LifecycleConfig()).missing == [B_ONLY.id] or pytest.fail("credited"),
    "delete": lambda p, t: (_unseen(p.delete(B_ONLY.id)), p.delete(SHARED.id)),
    "embed": lambda p, t: p.embed(["quokka"]) and None,
    "export": lambda p, t: _export(p, t),
    "fetch": lambda p, t: (_unseen(p.fetch([B_ONLY.id])), [h.payload for h in p.fetch([SHARED.id, A_ONLY.id])]),
    "flagged": lambda p, t: p.flagged(),
    "get": lambda p, t: (_unseen(p.get(B_ONLY.id)), p.get(SHARED.id)),
    "history": lambda p, t: _history_is_mine(p),
    "import_jsonl": _import,
    "near_copies": lambda p, t: _unseen(p.near_copies([B_ONLY], [B_ONLY.id], 0.5)),
    "optimize": lambda p, t: p.optimize(),
    "quarantined": lambda p, t: p.quarantined(),
    "query_vector": lambda p, t: p.query_vector("quokka") and None,
    "ranked": lambda p, t: [h.raw.payload for h in p.ranked("zebra quokka", 5, SearchFilter())],
    "read_fields": lambda p, t: (_unseen(p.read_fields([B_ONLY.id], ("type", "memory.stats"))),
                                 [h.payload for h in p.read_fields([SHARED.id, A_ONLY.id, SHARED.id],
                                                                   ("memory.stats", "credit", "memory.stale"))]),
    "release": lambda p, t: _unseen(p.release(B_ONLY.id)),
    "release_quarantine": lambda p, t: p.release_quarantine(p.get(SHARED.id)),
    "rescreen": lambda p, t: p.rescreen(),
    "retrieve": lambda p, t: [h.memory for h in p.retrieve("zebra quokka", k=5, lifecycle=LifecycleConfig()).hits],
    "search": lambda p, t: _search(p),
    "stats": lambda p, t: _stats(p),
    "statistics_held": lambda p, t: _held(p),
    "update_stats": lambda p, t: p.update_stats([SHARED.id, B_ONLY.id], "success"),
    "note_change": lambda p, t: (_unseen(p.note_change(B_ONLY.id, Change(action="edit_of", other=SHARED.id))),
                                 p.note_change(SHARED.id, Change(action="edit_of", other=B_ONLY.id))),
    "restore": lambda p, t: (_unseen(p.restore(B_ONLY.id)), p.archive(SHARED.id, "x"), p.restore(SHARED.id)),
    "restore_superseded": lambda p, t: (_unseen(p.restore_superseded(B_ONLY.id)), p.restore_superseded(SHARED.id)),
    "superseded": lambda p, t: p.superseded(),
    # the module functions that take a pool
    "consolidate.find_clusters": lambda p, t: _unseen(consolidate.find_clusters(p)),
    "consolidate.compare": lambda p, t: _unseen(consolidate.compare(p, incremental=True).clusters),
    "consolidate.finish": lambda p, t: consolidate.finish(p, consolidate.compare(p)),
    "consolidate.apply": lambda p, t: _consolidated(p),
    "consolidate.stale": lambda p, t: consolidate.stale(p, consolidate.PruneConfig(min_shown=1)),
    "consolidate.prune": lambda p, t: _prune(p),
    "snapshots.create_snapshot": lambda p, t: snapshots.create_snapshot(p, "s", t / "snaps").count == 2
    or pytest.fail("the snapshot holds another namespace's points"),
    "snapshots.restore_snapshot": _restore,
    "snapshots.points_of": lambda p, t: [pt.payload for pt in snapshots.points_of(p, "current")],
}
NOT_WALKED = {
    "open": "makes the pool: test_open_checks_the_name_before_touching_anything",
    "close": "releases the handle: test_namespaces_of_one_directory_share_its_engine",
    "namespaces": "counts every namespace by design: test_namespaces_are_listed_with_their_counts",
    "in_namespace": "a view of another namespace by design: test_a_view_of_another_namespace_is_that_namespace",
}


def pool_operations() -> set[str]:
    """Every public method of MemoryPool (its bases' too) and every public memory function taking a pool."""
    names = set()
    for cls in MemoryPool.__mro__[:-1]:
        for name, value in vars(cls).items():
            public = not name.startswith("_") or name in ("__iter__", "__len__", "__contains__", "__getitem__")
            if public and callable(getattr(MemoryPool, name, None)) and not isinstance(value, type):
                names.add(name)
    for prefix, module in (("consolidate", consolidate), ("snapshots", snapshots)):
        for name, fn in vars(module).items():
            if (inspect.isfunction(fn) and fn.__module__ == module.__name__ and not name.startswith("_")
                    and next(iter(inspect.signature(fn).parameters), None) == "pool"):
                names.add(f"{prefix}.{name}")
    return names


def test_every_pool_operation_has_a_recipe():
    missing = pool_operations() - set(RECIPES) - set(NOT_WALKED)
    assert not missing, f"add a namespace recipe for {sorted(missing)} to RECIPES"
    assert not set(RECIPES) - pool_operations(), "a recipe for an operation that no longer exists"


@pytest.mark.parametrize("operation", sorted(RECIPES))
def test_an_operation_in_one_namespace_never_touches_another(two, operation, tmp_path):
    mine, other = two
    before = stored(other)
    result = RECIPES[operation](mine, tmp_path)
    assert unchanged(before, stored(other)), f"{operation} changed the other namespace"
    assert B_SECRET not in repr(result), f"{operation} returned the other namespace's memory"
    assert not mine.store.inner.unscoped, f"{operation} reached the engine without the namespace"
    assert {m.id for m in other} == {SHARED.id, B_ONLY.id, *(t.id for t in B_TRAJS)}


# ------------------------------------------------------------------ the rest of the contract
@pytest.mark.parametrize("engine", ENGINES)
def test_the_same_memory_in_two_namespaces_is_two_points(engine, cached, tmp_path):
    location, kw = location_of(engine, tmp_path)
    tag = uuid.uuid4().hex[:8]
    with MemoryPool.open(location, cached, namespace=f"x{tag}", **kw) as x, \
            MemoryPool.open(location, cached, namespace=f"y{tag}", **kw) as y:
        assert x.add(SHARED).status == y.add(SHARED).status == "added"
        x.credit("run-x", [Use(SHARED.id, True)], "success")
        assert x.get(SHARED.id).stats.cited == 1 and y.get(SHARED.id).stats.cited == 0
        assert x.delete(SHARED.id) and y.get(SHARED.id) is not None and len(x) == 0
        y.delete(SHARED.id)


@pytest.mark.parametrize("engine", ["edge", "client"])
def test_a_pool_written_before_namespaces_reads_as_default(engine, cached, tmp_path):
    with MemoryPool.open(tmp_path / "old", cached, engine=engine) as old:
        old.add_many([SHARED, A_ONLY])
        assert all(NAMESPACE_KEY not in p.payload for p in old._opened.store.scroll_points())  # as before
    if engine == "edge":  # a shard made before the namespace field was indexed gets the index when opened
        from qdrant_edge import UpdateOperation

        from mtl_graph.memory.engine.edge.edge_store import EdgeStore

        shard = EdgeStore(str(tmp_path / "old" / "edge"), 384)
        shard.shard.update(UpdateOperation.delete_field_index(NAMESPACE_KEY))
        assert NAMESPACE_KEY not in shard.shard.info().payload_schema
        shard.close()
    with MemoryPool.open(tmp_path / "old", cached) as default, \
            MemoryPool.open(tmp_path / "old", cached, namespace="team") as team:
        assert {m.id for m in default} == {SHARED.id, A_ONLY.id} and len(default) == 2 and len(team) == 0
        assert default.search("output format", k=1)[0].memory.id == A_ONLY.id and team.search("output format") == []
        if engine == "edge":
            assert NAMESPACE_KEY in default.store.shard.info().payload_schema


def test_open_checks_the_name_before_touching_anything(cached, tmp_path):
    for bad, why in [("", "it is empty"), ("t" * 65, "65 characters"), ("team a", "' ' is not allowed"),
                     ("../etc", "'/' is not allowed"), ("-lead", "'-' is not allowed"),
                     ("équipe", "'é' is not allowed"), (None, "it is empty")]:
        with pytest.raises(NamespaceError) as err:
            MemoryPool.open(tmp_path / "p", cached, namespace=bad) if bad is not None else check_namespace(bad)
        message = str(err.value)
        assert message.startswith("invalid namespace") and why in message and "\n" not in message, message
    assert not (tmp_path / "p").exists()
    assert check_namespace("Team-1.prod_eu") == "Team-1.prod_eu"


def test_mtl_namespace_is_the_default_and_a_bad_one_is_one_line(cached, tmp_path, monkeypatch):
    from mtl_graph.config.environment import get_settings
    from mtl_graph.core.errors import SettingsError

    monkeypatch.setenv("MTL_NAMESPACE", "team-env")
    with MemoryPool.open(tmp_path / "p", cached) as pool:
        assert pool.namespace == "team-env"
    monkeypatch.setenv("MTL_NAMESPACE", "team env")
    with pytest.raises(SettingsError, match="MTL_NAMESPACE 'team env'.*' ' is not allowed"):
        get_settings()
    result = runner.invoke(app, ["memories", "stats"])
    assert result.exit_code == 1 and "MTL_NAMESPACE" in result.output and len(result.output.splitlines()) == 1


def test_namespaces_of_one_directory_share_its_engine(cached, tmp_path):
    a = MemoryPool.open(tmp_path / "p", cached, namespace="a")
    b = MemoryPool.open(tmp_path / "p", cached, namespace="b")
    assert MemoryPool.open(tmp_path / "p", cached, namespace="a") is a and a._opened is b._opened
    a.close()
    a.add(A_ONLY)  # the second handle of "a" is still open
    a.close()
    b.add(B_ONLY)  # the engine stays open for "b"
    assert b.namespaces() == {"a": 1, "b": 1, "default": 0}
    b.close()
    with MemoryPool.open(tmp_path / "p", cached, namespace="a") as again:
        assert [m.id for m in again] == [A_ONLY.id]


@pytest.mark.parametrize("engine", ["edge", "client"])
def test_namespaces_are_listed_with_their_counts(engine, cached, tmp_path):
    with MemoryPool.open(tmp_path / "p", cached, engine=engine) as default, \
            MemoryPool.open(tmp_path / "p", cached, namespace="team-b") as b, \
            MemoryPool.open(tmp_path / "p", cached, namespace="empty") as empty:
        default.add(SHARED)
        b.add_many([SHARED, B_ONLY])
        assert default.namespaces() == {"default": 1, "team-b": 2}
        assert empty.namespaces() == {"default": 1, "empty": 0, "team-b": 2}
        assert len(default) == 1 and len(empty) == 0


def test_cli_namespace_option_and_listing(tmp_path):
    pool = str(tmp_path / "p")
    (tmp_path / "m.jsonl").write_text(B_ONLY.model_dump_json() + "\n")
    (tmp_path / "n.jsonl").write_text(A_ONLY.model_dump_json() + "\n")
    assert runner.invoke(app, ["memories", "add", str(tmp_path / "m.jsonl"), "--pool", pool,
                               "--namespace", "team-b"]).exit_code == 0
    assert runner.invoke(app, ["memories", "add", str(tmp_path / "n.jsonl"), "--pool", pool]).exit_code == 0
    found = runner.invoke(app, ["memories", "search", "zebra quokka permit", "--pool", pool, "--json"])
    assert found.exit_code == 0 and B_SECRET not in found.output
    found = runner.invoke(app, ["memories", "search", "zebra quokka permit", "--pool", pool, "--namespace",
                                "team-b", "--json"])
    assert found.exit_code == 0 and B_SECRET in found.output
    assert runner.invoke(app, ["memories", "export", str(tmp_path / "out.jsonl"), "--pool", pool]).exit_code == 0
    assert B_SECRET not in (tmp_path / "out.jsonl").read_text()
    listed = runner.invoke(app, ["pool", "namespaces", "--pool", pool, "--json"])
    assert listed.exit_code == 0 and json.loads(listed.output) == {"default": 1, "team-b": 1}
    bad = runner.invoke(app, ["memories", "stats", "--pool", pool, "--namespace", "team/b"])
    assert bad.exit_code == 1 and bad.output.count("\n") == 1 and "invalid namespace 'team/b'" in bad.output


def test_an_engine_call_the_namespace_does_not_know_is_refused(cached, tmp_path):
    from mtl_graph.memory.errors import PoolError
    from mtl_graph.memory.engine.storage import StoredPoint

    with MemoryPool.open(tmp_path / "p", cached, namespace="team") as pool:
        with pytest.raises(AttributeError, match="'delete_by_filter' is not a namespaced store operation"):
            pool.store.delete_by_filter  # noqa: B018 (a new engine method must say how it keeps the namespace)
        assert pool.store.indexed == 0  # index state passes through
        with pytest.raises(PoolError, match="'7' is not a UUID: namespace 'team' holds UUIDs only"):
            pool.store.upsert([StoredPoint("7", [0.1] * pool.dim, ([1], [1.0]), {})])
        assert len(pool) == 0


def test_a_view_of_another_namespace_is_that_namespace(two):
    """What a run whose settings name a namespace reads and writes through: exactly that namespace."""
    mine, other = two
    assert mine.in_namespace(mine.namespace) is mine
    view = mine.in_namespace(other.namespace)
    assert view.namespace == other.namespace and {m.id for m in view} == {m.id for m in other}
    added = view.add(InsightMemory(title="Written through a view", description="A run in the other namespace.",
                                   content="It lands in that namespace only."))
    assert other.get(added.id) is not None and mine.get(added.id) is None
    with pytest.raises(NamespaceError):
        mine.in_namespace("../escape")
